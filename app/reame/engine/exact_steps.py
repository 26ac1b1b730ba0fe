"""Whether a step computed each of its sequences as that sequence alone would have been computed:
what an answer must hold at every step to be kept in the answer memory (api/answer_memory.py).
Pure.

A verify run gives the logits one-token steps give up to the run length and the position the
start-up probe measured (engine/exact_run.py). A sequence that shares a llama_decode with others
is computed as alone only where the probe found it so: one token each, as many sequences as it
measured, before the position where f16 attention takes another path; or a prompt chunk in the
tiled path, whose queries round alike however many share the batch (exact_reuse.py). Anything
else (a narrow prompt chunk beside another, a verify run beside another) may round otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from reame.engine.exact_reuse import TILED_QUERIES


class Step(Protocol):
    """One sequence's part of a llama_decode (engine/step_plan.py Part)."""

    @property
    def tokens(self) -> tuple[int, ...]: ...
    @property
    def end(self) -> int: ...
    @property
    def is_verify(self) -> bool: ...


@dataclass(slots=True)
class ExactPaths:
    """What the start-up probe found computed as one-token steps of a lone sequence are."""

    # the longest verify run of one sequence; None: every run the probe tried (PROBE_LIMIT)
    # was exact, and longer ones are taken as exact too, as speculation takes them (a run of 8
    # already takes the matmuls' tiled path, which longer runs take)
    run: int | None = 1
    until: int | None = 0  # the first position a run may not reach (None: any; 0: not probed)
    neighbours: int = 1  # sequences of one token each one llama_decode may hold
    # the rows of a batch the weights take in groups (exact_run.row_granule): a sequence's
    # rows group as alone only where the rows before it in the batch fill whole groups
    granule: int = 1


def call_is_exact(parts: Sequence[Step], paths: ExactPaths) -> bool:
    """Whether one llama_decode of `parts` computes each as it would be computed alone."""
    for part in parts:
        if part.is_verify and not _within(len(part.tokens), part.end, paths):
            return False
    if len(parts) == 1:
        return True
    if all(len(p.tokens) >= TILED_QUERIES and not p.is_verify for p in parts):
        return all(len(p.tokens) % paths.granule == 0 for p in parts[:-1])
    return (
        len(parts) <= paths.neighbours
        and all(len(p.tokens) == 1 for p in parts)
        and (paths.until is None or all(p.end <= paths.until for p in parts))
    )


def _within(run: int, end: int, paths: ExactPaths) -> bool:
    fits = paths.run is None or run <= paths.run
    return fits and (paths.until is None or end <= paths.until)
