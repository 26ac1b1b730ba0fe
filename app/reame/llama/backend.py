"""llama.cpp's process-wide side: the backend loaded once (with the best CPU variant of a
portable build), its log routed to structlog, and what this build and this CPU offer.

NOTE: llama_cpp comes from reame.llama.binding, its one import.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import structlog

from reame.llama.binding import lc

log = structlog.get_logger("reame.llama")

_LOG_LEVELS = {1: "debug", 2: "info", 3: "warning", 4: "error"}
_GGML_LOG_CONT = 5
_GGML_LOG_ERROR = 4
_log_line: list[bytes] = []
_log_state = {"min_level": 3, "level": 2}  # llama.cpp is chatty: warnings and errors by default
# NOTE: while a model loads, its errors are kept for the one-line error we raise, not logged
_load_errors: list[str] | None = None
_is_backend_ready = False
# NOTE: what a decode stopped by its interrupt check writes (Context.interrupt_when): expected
# while one is armed, so logged at debug there, not as errors
_INTERRUPTED_LINES = (
    "graph_compute: ggml_backend_sched_graph_compute_async failed with error 1",
    "process_ubatch: failed to compute graph, compute status: 1",
    "decode: removing memory module entries",
    "llama_decode: failed to decode, ret = 2",
)
_interrupts = {"armed": False}


def arm_interrupts(armed: bool) -> None:
    """A decode may now stop by its interrupt check (or no longer)."""
    _interrupts["armed"] = armed


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
    level = _log_state["level"]
    if _interrupts["armed"] and line.startswith(_INTERRUPTED_LINES):
        level = 1
        if level < _log_state["min_level"]:
            return
    getattr(log, _LOG_LEVELS.get(level, "debug"))("llama.cpp", message=line)


def init_backend() -> None:
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
    init_backend()
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


def load_model_file(path: Path, params: object) -> tuple[object, list[str]]:
    """llama_model_load_from_file: the model's pointer (null if it failed) and the errors
    llama.cpp logged meanwhile, kept for the one-line error the caller raises."""
    global _load_errors
    _load_errors = []
    try:
        ptr = lc.llama_model_load_from_file(str(path).encode(), params)
    finally:
        errors, _load_errors = _load_errors, None
    return ptr, errors
