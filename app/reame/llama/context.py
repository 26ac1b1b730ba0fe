"""One llama context: a KV cache for several sequences (its shape), one batch decoded at a
time, and the sequences' states saved, loaded, copied and cut.

NOTE: llama_cpp comes from reame.llama.binding, its one import.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from reame.errors import ModelLoadError
from reame.llama.backend import arm_interrupts
from reame.llama.binding import lc
from reame.llama.model import Model


class DecodeError(RuntimeError):
    """llama_decode failed; `code` 1 means no KV cache slot was free for the batch."""

    def __init__(self, code: int) -> None:
        super().__init__(f"llama_decode failed with code {code}")
        self.code = code


class DecodeInterrupted(DecodeError):
    """llama_decode stopped because its interrupt check said so (Context.interrupt_when):
    nothing of the batch's last micro-batch is kept (llama.cpp removes its positions)."""


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


# NOTE: bytearray(size) fills its pages with zeros holding the GIL: for a 69 MB state of the
# Qwen3 1.7B shape 39 ms in a process alone, up to 0.23 s in a server on pages new to it, while
# no request could come in (docs/replay/stop57-final-states). Unfilled, its pages are first
# touched by llama.cpp's copy, which runs without the GIL (what it does not write is cut off).
_new_bytearray = ctypes.pythonapi.PyByteArray_FromStringAndSize
_new_bytearray.restype = ctypes.py_object
_new_bytearray.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]


def _unfilled(size: int) -> bytearray:
    """A bytearray of `size` bytes whose contents are whatever its memory held."""
    return _new_bytearray(None, size)


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
        # NOTE: the model's raw pointer is shared within reame.llama only
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
        self._interrupt: Callable[[object], bool] | None = None  # kept alive while llama.cpp has it

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
        if code == 2 and self._interrupt is not None:
            raise DecodeInterrupted(code)
        if code != 0:
            raise DecodeError(code)

    def interrupt_when(self, check: Callable[[], bool] | None) -> None:
        """The next decodes stop between two operations of their graph once `check()` is true
        (DecodeInterrupted), until this is set to None. NOTE: llama.cpp asks on its first
        compute thread before each operation (537 times in a 64-token step at the Qwen3 1.7B
        shape), taking the GIL each time: 1% of that step's time, 3% beside a busy thread
        (measured), so only steps that may stop should ask."""

        def asks(_data: object) -> bool:
            try:
                return bool(check())  # type: ignore[misc]
            except Exception:  # NOTE: an exception cannot cross into llama.cpp
                return False

        self._interrupt = lc.ggml_abort_callback(asks) if check is not None else None
        callback = self._interrupt or ctypes.cast(None, lc.ggml_abort_callback)
        lc.llama_set_abort_callback(self._ptr, callback, None)
        arm_interrupts(check is not None)

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
        data = _unfilled(size)
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
