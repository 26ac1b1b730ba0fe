"""KV data movement as items: what the scheduler and the update decide a sequence's KV is to
become (a stored state restored into it, its cells cut back, it emptied, a prompt copied into
others, a verify run rolled back), queued where it is decided and done by the runner, in order,
before the next batch or the next read of a state. Engine thread only.

A move that fails (a state that does not fit, memory that cannot be cut there) leaves its
sequences emptied; they are `lost` to the scheduler, which forgets what they held and starts
whoever holds them over from its first token. Never does a sequence go on from a wrong state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reame import metrics
from reame.engine.kv_context import KVContext


@dataclass(slots=True, frozen=True)
class Restore:
    slot: int
    data: bytes | bytearray  # a saved state (SavedState.data)


@dataclass(slots=True, frozen=True)
class Cut:
    slot: int
    at: int  # its cells from this position on are dropped


@dataclass(slots=True, frozen=True)
class Empty:
    slot: int


@dataclass(slots=True, frozen=True)
class Copy:
    source: int
    targets: tuple[int, ...]


@dataclass(slots=True, frozen=True)
class Rollback:
    """Memory that cannot be cut: back to the checkpoint taken at `at` tokens."""

    slot: int
    checkpoint: bytearray
    at: int


Move = Restore | Cut | Empty | Copy | Rollback


class KVMoves:
    def __init__(self, context: KVContext) -> None:
        self.context = context
        self._due: list[Move] = []
        self._lost: set[int] = set()

    @property
    def can_cut(self) -> bool:
        return self.context.can_cut

    def add(self, move: Move) -> None:
        self._due.append(move)

    def do(self) -> None:
        """Every queued move, in the order decided."""
        due, self._due = self._due, []
        for move in due:
            if not self._done(move):
                slots = move.targets if isinstance(move, Copy) else (move.slot,)
                for slot in slots:
                    self.context.clear(slot)
                self._lost.update(slots)

    def read(self, slot: int) -> bytearray | None:
        """A sequence's state as the queued moves leave it; None if one of them failed there
        (what it holds is not what it was to hold)."""
        self.do()
        return None if slot in self._lost else self.context.save_state(slot)

    def has_lost(self, slots: Iterable[int]) -> bool:
        return any(slot in self._lost for slot in slots)

    def take_lost(self) -> set[int]:
        """The sequences emptied by a failed move since last asked."""
        lost, self._lost = self._lost, set()
        return lost

    def _done(self, move: Move) -> bool:
        context = self.context
        if isinstance(move, Restore):
            with metrics.PREFIX_RESTORE_SECONDS.time():
                return context.load_state(move.slot, move.data)
        if isinstance(move, Cut):
            return context.remove(move.slot, move.at)
        if isinstance(move, Empty):
            context.clear(move.slot)
            return True
        if isinstance(move, Copy):
            try:
                context.copy(move.source, list(move.targets))
            except RuntimeError:
                return False
            return True
        return context.rollback(move.slot, move.checkpoint, move.at)
