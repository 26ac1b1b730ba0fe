"""llama.cpp's own quantizer (what `llama-quantize` runs), in process.

NOTE: llama_cpp comes from reame.llama.binding, its one import.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from reame.errors import ModelLoadError
from reame.llama.backend import init_backend
from reame.llama.binding import lc

QUANT_TYPES = {"Q4_K_M": lc.LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q8_0": lc.LLAMA_FTYPE_MOSTLY_Q8_0}


def quantize_file(source: Path, target: Path, quant: str, num_threads: int) -> None:
    """llama.cpp's own quantizer (what `llama-quantize` runs), in process."""
    init_backend()
    params = lc.llama_model_quantize_default_params()
    params.nthread = num_threads
    params.ftype = QUANT_TYPES[quant]
    code = lc.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if code != 0:
        raise ModelLoadError(f"quantizing {source} to {quant} failed (code {code})")
