"""What Reame needs to know of a GGUF model to size itself, and the cheap check that a file is
one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reame.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"


@dataclass(slots=True, frozen=True)
class ModelFacts:
    path: Path
    architecture: str
    name: str
    file_size: int
    context_train: int
    num_layers: int
    kv_bytes_per_token: int  # f16 K and V over all layers
    has_chat_template: bool


def check_magic(path: Path) -> None:
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(f"cannot read model file {path}: {exc.strerror}") from exc
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r}); "
            "re-download it (`reame pull MODEL`) or point model_path at a .gguf file"
        )
