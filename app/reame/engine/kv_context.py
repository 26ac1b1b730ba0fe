"""What the engine needs of a llama context: one batch computed at a time, and each sequence's
KV cells kept, cut, copied, saved and restored. `reame.llama.context.Context` is the real one; the
engine tests run a fake one (tests/fake_llama.py) that checks every position it is given."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from reame.llama.context import ContextShape


class KVContext(Protocol):
    shape: ContextShape
    can_cut: bool  # False: recurrent memory, which a verify run checkpoints instead

    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int],
        wants_logits: Sequence[bool],
    ) -> None:
        """Compute one batch; raises reame.llama.context.DecodeError if llama.cpp refuses it."""

    def interrupt_when(self, check: Callable[[], bool] | None) -> None:
        """Decodes stop once `check()` is true (raising reame.llama.context.DecodeInterrupted,
        nothing of the batch kept); None: they run to the end."""

    def logits(self, batch_index: int) -> np.ndarray:
        """The logits of the last batch's token at `batch_index` (which must have asked)."""

    def save_state(self, seq_id: int) -> bytearray: ...

    def load_state(self, seq_id: int, data: bytes | bytearray) -> bool:
        """Replace a sequence's cells with a saved state; False if it does not fit."""

    def copy(self, source: int, targets: Sequence[int]) -> None:
        """Every target's cells become the source's (raises RuntimeError if it cannot)."""

    def remove(self, seq_id: int, start: int = 0, end: int = -1) -> bool:
        """Drop cells [start, end); False where the memory cannot be cut (recurrent layers)."""

    def clear(self, seq_id: int) -> None: ...

    def checkpoint(self, seq_id: int) -> bytearray:
        """What of a sequence cannot be cut back (its recurrent state), to roll back to."""

    def rollback(self, seq_id: int, checkpoint: bytearray, position: int) -> bool:
        """Back to a checkpoint taken at `position` tokens; False if refused."""
