"""What every draft source offers the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Drafter(Protocol):
    """Proposes tokens that may come next in a sequence.

    Invariants: `propose` never returns more than `k` tokens and returns [] when it has nothing
    (never a guess of its own making: a draft costs a verify slot); it does not change the
    sequence. `observe` is told, after verification, how many of its last proposal were kept.
    `runs_a_model`: proposing costs a forward pass a token (a draft model), not a lookup."""

    name: str
    runs_a_model: bool

    def propose(self, history: Sequence[int], k: int) -> list[int]: ...

    def observe(self, proposed: int, accepted: int) -> None: ...
