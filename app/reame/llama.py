"""Owning wrappers over llama.cpp (llama-cpp-python's low-level API): model, context, batch.

NOTE: the only module that imports llama_cpp. Every C resource here has close() and a context
manager; nothing else holds a raw pointer: the model, the context, the backend and the
quantizer call are all here, as the one module that owns llama_cpp.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp as lc
import numpy as np
import structlog

from reame.errors import ModelLoadError

log = structlog.get_logger("reame.llama")

_LOG_LEVELS = {1: "debug", 2: "info", 3: "warning", 4: "error"}
_GGML_LOG_CONT = 5
_GGML_LOG_ERROR = 4
_log_line: list[bytes] = []
_log_state = {"min_level": 3, "level": 2}  # llama.cpp is chatty: warnings and errors by default
# NOTE: while a model loads, its errors are kept for the one-line error we raise, not logged
_load_errors: list[str] | None = None
_is_backend_ready = False


def set_llama_log_level(name: str) -> None:
    """Forward llama.cpp's messages at this level and above ("debug" forwards everything)."""
    _log_state["min_level"] = {"debug": 1, "info": 3, "warning": 3, "error": 4}[name]


@lc.llama_log_callback
def _route_llama_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    # NOTE: module-level so the callback outlives every call from C (a collected one segfaults)
    if level != _GGML_LOG_CONT:
        _log_state["level"] = level
    if _log_state["level"] < _log_state["min_level"]:
        return
    _log_line.append(text or b"")
    if not _log_line[-1].endswith(b"\n"):
        return
    line = b"".join(_log_line).decode("utf-8", "replace").rstrip()
    _log_line.clear()
    if not line:
        return
    if _load_errors is not None and _log_state["level"] == _GGML_LOG_ERROR:
        _load_errors.append(line)
        return
    getattr(log, _LOG_LEVELS.get(_log_state["level"], "debug"))("llama.cpp", message=line)


def _init_backend() -> None:
    global _is_backend_ready
    if not _is_backend_ready:
        lc.llama_log_set(_route_llama_log, ctypes.c_void_p(0))
        _load_cpu_variants()
        lc.llama_backend_init()
        _is_backend_ready = True


def _load_cpu_variants() -> None:
    """A portable build (GGML_CPU_ALL_VARIANTS, the Docker image) keeps one CPU backend per
    instruction set beside libggml; ggml looks for them only beside the executable and in the
    working directory, so point it at them. It loads the best one this CPU supports."""
    lib_dir = Path(lc.__file__).parent / "lib"
    if not any(lib_dir.glob("libggml-cpu-*")):
        return  # a build for one CPU links its backend in
    # NOTE: looked up through libllama's handle, which reaches the libggml libllama itself uses;
    # a wheel holds copies, not symlinks, so opening libggml.so by path would load a second
    # libggml whose backend registry libllama never sees
    load = lc.llama_cpp._lib.ggml_backend_load_all_from_path
    load.argtypes = [ctypes.c_char_p]
    load.restype = None
    load(str(lib_dir).encode())


def build_identity() -> tuple[str, list[Path]]:
    """llama-cpp-python's version and the native libraries of this build (what a snapshot's
    fingerprint hashes: the same source compiled otherwise rounds otherwise)."""
    lib_dir = Path(lc.__file__).parent / "lib"
    return lc.__version__, sorted(p for p in lib_dir.glob("lib*.so*") if p.is_file())


def cpu_backend() -> str:
    """The CPU features the loaded backend computes with, as llama.cpp reports them (a
    portable build picks its variant by the CPU it runs on)."""
    _init_backend()
    return lc.llama_print_system_info().decode(errors="replace").strip()


_CPU_DEVICE = 0  # GGML_BACKEND_DEVICE_TYPE_CPU
_extra_buffers: list[str] | None = None


def cpu_extra_buffers() -> list[str]:
    """The extra weight buffer types the CPU backend offers (AMX, CPU_REPACK), as ggml names
    them. Called after the backend is loaded."""
    global _extra_buffers
    if _extra_buffers is None:
        lib = lc.llama_cpp._lib
        for name, restype, argtypes in (
            ("ggml_backend_dev_by_type", ctypes.c_void_p, [ctypes.c_int]),
            ("ggml_backend_dev_backend_reg", ctypes.c_void_p, [ctypes.c_void_p]),
            (
                "ggml_backend_reg_get_proc_address",
                ctypes.c_void_p,
                [ctypes.c_void_p, ctypes.c_char_p],
            ),
            ("ggml_backend_buft_name", ctypes.c_char_p, [ctypes.c_void_p]),
        ):
            getattr(lib, name).restype, getattr(lib, name).argtypes = restype, argtypes
        device = lib.ggml_backend_dev_by_type(_CPU_DEVICE)
        reg = lib.ggml_backend_dev_backend_reg(device) if device else None
        found = reg and lib.ggml_backend_reg_get_proc_address(
            reg, b"ggml_backend_dev_get_extra_bufts"
        )
        names = []
        if found:
            get = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(found)
            types = get(device)
            while types and types[len(names)]:
                names.append(lib.ggml_backend_buft_name(types[len(names)]).decode())
        _extra_buffers = names
    return _extra_buffers


class DecodeError(RuntimeError):
    """llama_decode failed; `code` 1 means no KV cache slot was free for the batch."""

    def __init__(self, code: int) -> None:
        super().__init__(f"llama_decode failed with code {code}")
        self.code = code


class Model:
    """A loaded GGUF model (weights mmapped) and its vocabulary."""

    def __init__(self, path: Path) -> None:
        _init_backend()
        params = lc.llama_model_default_params()
        params.n_gpu_layers = 0
        # NOTE: ggml's AMX matmul segfaults on the first decode on Sapphire Rapids VMs (seen
        # here on SmolLM2 Q4_1; llama.cpp#20824, dspy#10079): where the CPU backend offers AMX
        # buffers, weights stay in plain CPU buffers (no AMX, no repacking)
        params.use_extra_bufts = "AMX" not in cpu_extra_buffers()
        global _load_errors
        _load_errors = []
        try:
            ptr = lc.llama_model_load_from_file(str(path).encode(), params)
        finally:
            errors, _load_errors = _load_errors, None
        if not ptr:
            cause = errors[0].split("error loading model: ")[-1] if errors else "no reason given"
            raise ModelLoadError(
                f"llama.cpp could not load {path} ({cause}): the file is damaged, truncated or "
                "of an architecture this llama.cpp does not know; re-download it "
                "(`reame pull MODEL`)"
            )
        self.path = path
        self._ptr = ptr
        self._vocab = lc.llama_model_get_vocab(ptr)
        self.vocab_size: int = lc.llama_vocab_n_tokens(self._vocab)
        self.context_train: int = lc.llama_model_n_ctx_train(ptr)
        self.bos_id: int = lc.llama_vocab_bos(self._vocab)
        self.eos_id: int = lc.llama_vocab_eos(self._vocab)
        template = lc.llama_model_chat_template(ptr, None)
        self.chat_template: str | None = template.decode() if template else None
        self.name = self.meta("general.name") or path.stem
        self.architecture = self.meta("general.architecture") or "unknown"
        self.num_layers: int = lc.llama_model_n_layer(ptr)
        self.memory_kind = _memory_kind(ptr)
        self.kv_bytes_per_token = self._kv_bytes_per_token()
        self._pieces: dict[int, bytes] = {}

    def _kv_bytes_per_token(self) -> int:
        """f16 K and V of one token over all layers (head sizes from the metadata when set)."""
        num_heads = max(lc.llama_model_n_head(self._ptr), 1)
        default_dim = lc.llama_model_n_embd(self._ptr) // num_heads
        dims = [
            int(self.meta(f"{self.architecture}.attention.{kind}_length") or default_dim)
            for kind in ("key", "value")
        ]
        return 2 * self.num_layers * lc.llama_model_n_head_kv(self._ptr) * sum(dims)

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = lc.llama_model_meta_val_str(self._ptr, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def tokenize(
        self, text: str, add_special: bool = True, parse_special: bool = True
    ) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (lc.llama_token * capacity)()
        n = lc.llama_tokenize(
            self._vocab, data, len(data), buf, capacity, add_special, parse_special
        )
        if n < 0:  # capacity too small: -n is what it needs
            capacity = -n
            buf = (lc.llama_token * capacity)()
            n = lc.llama_tokenize(
                self._vocab, data, len(data), buf, capacity, add_special, parse_special
            )
        return list(buf[:n])

    def tokenizer_fingerprint(self) -> str:
        """Names the vocabulary: token ids mean the same text under the same fingerprint."""
        h = hashlib.blake2b(digest_size=8)
        h.update(f"{self.vocab_size}:{self.bos_id}:{self.eos_id}".encode())
        for token in range(0, self.vocab_size, 7):  # NOTE: a sample keeps start-up fast
            h.update(self._to_piece(token, special=True))
        return f"vocab-{h.hexdigest()}"

    @property
    def adds_eos(self) -> bool:
        """The tokenizer appends an end-of-sequence token to what it tokenizes."""
        return bool(lc.llama_vocab_get_add_eos(self._vocab))

    def is_splitting_token(self, text: str) -> bool:
        """`text` is one control (or user-defined) token that does not strip the whitespace
        before it: llama.cpp splits text there before tokenizing, so the text on either side
        tokenizes alone exactly as it does in the whole."""
        tokens = self.tokenize(text, add_special=False)
        if len(tokens) != 1:
            return False
        attr = lc.llama_vocab_get_attr(self._vocab, tokens[0])
        special = lc.LLAMA_TOKEN_ATTR_CONTROL | lc.LLAMA_TOKEN_ATTR_USER_DEFINED
        return bool(attr & special) and not attr & lc.LLAMA_TOKEN_ATTR_LSTRIP

    def piece(self, token: int) -> bytes:
        """The bytes a token adds to generated text (control tokens add none)."""
        cached = self._pieces.get(token)
        if cached is None:
            cached = self._pieces[token] = self._to_piece(token, special=False)
        return cached

    def token_text(self, token: int) -> str:
        """A token's text including special tokens' names (for templates)."""
        return self._to_piece(token, special=True).decode("utf-8", "replace")

    def _to_piece(self, token: int, special: bool) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def is_end_of_generation(self, token: int) -> bool:
        return bool(lc.llama_vocab_is_eog(self._vocab, token))

    def end_of_generation_ids(self) -> list[int]:
        return [t for t in range(self.vocab_size) if lc.llama_vocab_is_eog(self._vocab, t)]

    @property
    def vocab_handle(self) -> object:
        """llama.cpp's vocabulary pointer, for libraries that read it (llguidance)."""
        return self._vocab

    def close(self) -> None:
        if self._ptr:
            lc.llama_model_free(self._ptr)
            self._ptr = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _memory_kind(ptr: object) -> str:
    """ "attention" (a KV cache, cut anywhere), "recurrent" (one state a sequence) or "hybrid"
    (both): what a sequence can be cut back to, as llama.cpp says of the model."""
    if lc.llama_model_is_hybrid(ptr):
        return "hybrid"
    return "recurrent" if lc.llama_model_is_recurrent(ptr) else "attention"


@dataclass(slots=True, frozen=True)
class ContextShape:
    num_cells: int  # KV cells of all sequences together (each gets num_cells / num_sequences)
    batch_size: int
    num_sequences: int
    num_threads: int
    # NOTE: separate KV streams per sequence keep each sequence's greedy output identical to
    # running it alone; a unified cache interleaves other sequences' cells into its attention
    # sums and changes the rounding (measured: 4 of 5 greedy outputs diverged on SmolLM2).
    is_kv_unified: bool = False
    # NOTE: "q8_0" makes attention batch-invariant at any context length: with f16 K/V,
    # llama.cpp's CPU flash attention splits a lone one-token decode's KV across threads once
    # the cache passes 256 cells, and rounds otherwise than a batch of queries (logits apart by
    # up to 1.2, measured here), so drafts or batch neighbours can change greedy output there
    kv_type: str = "f16"


KV_TYPES = {"f16": lc.GGML_TYPE_F16, "q8_0": lc.GGML_TYPE_Q8_0}


class Context:
    """One llama context: a KV cache for several sequences, plus one batch."""

    def __init__(self, model: Model, shape: ContextShape) -> None:
        params = lc.llama_context_default_params()
        params.n_ctx = shape.num_cells
        params.n_batch = params.n_ubatch = shape.batch_size
        params.n_seq_max = shape.num_sequences
        params.n_threads = params.n_threads_batch = shape.num_threads
        params.kv_unified = shape.is_kv_unified
        params.type_k = params.type_v = KV_TYPES[shape.kv_type]
        params.no_perf = True
        ptr = lc.llama_init_from_model(model._ptr, params)
        if not ptr:
            raise ModelLoadError(
                f"llama.cpp could not create a context of {shape.num_cells} cells for "
                f"{model.path}; lower context_length or parallel"
            )
        self.model, self.shape = model, shape
        # NOTE: a recurrent state holds its last position only: such a sequence cannot be cut
        # back (llama_memory_seq_rm refuses), and a verify run needs a checkpoint instead
        self.can_cut = model.memory_kind == "attention"
        # what a saved sequence state depends on besides the model: a state is only loaded into
        # a context that lays out its KV cache the same way
        self.kv_layout = (
            f"kv {shape.kv_type}/{shape.kv_type}; "
            f"flash_attn {int(params.flash_attn_type)}; unified {int(shape.is_kv_unified)}"
        )
        self._ptr = ptr
        self._memory = lc.llama_get_memory(ptr)
        self._batch = lc.llama_batch_init(shape.batch_size, 0, 1)
        self._has_batch = True
        self._logit_views: dict[int, np.ndarray] = {}

    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int],
        wants_logits: Sequence[bool],
    ) -> None:
        """One forward pass over up to batch_size tokens of any sequences."""
        b = self._batch
        n = len(tokens)
        for i in range(n):
            b.token[i] = tokens[i]
            b.pos[i] = positions[i]
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq_ids[i]
            b.logits[i] = wants_logits[i]
        b.n_tokens = n
        code = lc.llama_decode(self._ptr, b)
        if code != 0:
            raise DecodeError(code)

    def logits(self, batch_index: int) -> np.ndarray:
        """A view (no copy) of the logits of one output token of the last decode; valid until
        the next decode."""
        ptr = lc.llama_get_logits_ith(self._ptr, batch_index)
        address = ctypes.addressof(ptr.contents)
        view = self._logit_views.get(address)
        if view is None:  # NOTE: the output buffer stays put between decodes: views are reused
            if len(self._logit_views) >= 256:
                self._logit_views.clear()
            view = np.ctypeslib.as_array(ptr, shape=(self.model.vocab_size,))
            self._logit_views[address] = view
        return view

    def save_state(self, seq_id: int) -> bytearray:
        """A sequence's KV state (llama_state_seq_get_data)."""
        return self._read_state(seq_id, 0)

    def load_state(self, seq_id: int, data: bytes | bytearray) -> bool:
        """Restore a saved state into a (cleared) sequence; False if llama.cpp refuses it."""
        self.clear(seq_id)
        ok = self._write_state(seq_id, data, 0)
        if not ok:
            self.clear(seq_id)
        return ok

    def checkpoint(self, seq_id: int) -> bytearray:
        """The part of a sequence's state that cannot be cut back (recurrent layers; nothing
        on a plain KV cache), to return to with `rollback` (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY,
        as llama.cpp's speculative example checkpoints before a verify batch)."""
        return self._read_state(seq_id, lc.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)

    def rollback(self, seq_id: int, checkpoint: bytearray, position: int) -> bool:
        """Back to a checkpoint taken when the sequence held `position` tokens: its recurrent
        state restored, its KV cells from `position` on removed. False if llama.cpp refuses
        (the sequence must then be computed again)."""
        ok = self._write_state(seq_id, checkpoint, lc.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)
        return ok and self.remove(seq_id, position)

    def _read_state(self, seq_id: int, flags: int) -> bytearray:
        """Written straight into the buffer that keeps it: a second 30 MB copy, on fresh
        pages, took as long as the first."""
        size = lc.llama_state_seq_get_size_ext(self._ptr, seq_id, flags)
        data = bytearray(size)
        view = (ctypes.c_uint8 * size).from_buffer(data)
        written = lc.llama_state_seq_get_data_ext(self._ptr, view, size, seq_id, flags)
        del view  # NOTE: a bytearray with a live export cannot be resized
        if written < size:
            del data[written:]
        return data

    def _write_state(self, seq_id: int, data: bytes | bytearray, flags: int) -> bool:
        # NOTE: llama.cpp only reads the buffer: point it at the bytes, no 30 MB copy
        if isinstance(data, bytearray):
            src = (ctypes.c_uint8 * len(data)).from_buffer(data)
        else:
            src = ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))
        ok = lc.llama_state_seq_set_data_ext(self._ptr, src, len(data), seq_id, flags) != 0
        del src
        return ok

    def copy(self, source: int, targets: Sequence[int]) -> None:
        """Make each target sequence hold what `source` holds. On a unified KV cache that is
        llama_memory_seq_cp, which only marks cells. NOTE: with per-sequence streams seq_cp
        copies the source's whole stream (94 MB for 4096 SmolLM2 cells; a Conclave of 5 took
        45 ms longer so, measured), so there the cells held are serialized once and loaded
        into each target."""
        if self.shape.is_kv_unified:
            for target in targets:
                self.clear(target)
                lc.llama_memory_seq_cp(self._memory, source, target, -1, -1)
            return
        data = self.save_state(source)
        for target in targets:
            if not self.load_state(target, data):
                raise RuntimeError("llama.cpp refused a copy of a sequence's state")

    def remove(self, seq_id: int, start: int = 0, end: int = -1) -> bool:
        """Drop positions [start, end) of a sequence from the KV cache (end -1: to the end).
        False if llama.cpp cannot cut the sequence there (recurrent memory keeps only its last
        state): the sequence then holds what it held, and the caller must start it over."""
        return bool(lc.llama_memory_seq_rm(self._memory, seq_id, start, end))

    def clear(self, seq_id: int) -> None:
        """Empty a sequence: removing all of it always succeeds."""
        if not self.remove(seq_id):
            raise RuntimeError(f"llama.cpp could not empty sequence {seq_id}")

    def close(self) -> None:
        if self._has_batch:
            lc.llama_batch_free(self._batch)
            self._has_batch = False
        if self._ptr:
            lc.llama_free(self._ptr)
            self._ptr = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


QUANT_TYPES = {"Q4_K_M": lc.LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q8_0": lc.LLAMA_FTYPE_MOSTLY_Q8_0}


def quantize_file(source: Path, target: Path, quant: str, num_threads: int) -> None:
    """llama.cpp's own quantizer (what `llama-quantize` runs), in process."""
    _init_backend()
    params = lc.llama_model_quantize_default_params()
    params.nthread = num_threads
    params.ftype = QUANT_TYPES[quant]
    code = lc.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if code != 0:
        raise ModelLoadError(f"quantizing {source} to {quant} failed (code {code})")
