"""Packing one step: which tokens of which sequences go into the next llama batch. Pure.

There is no prefill/decode branch: every sequence has tokens it knows and tokens already in the
KV cache, and a step computes part of the difference for many sequences at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reame.engine.exact_reuse import widened_start


@dataclass(slots=True, frozen=True)
class Work:
    """What one sequence still has to compute: tokens known versus tokens in the KV cache."""

    num_known: int
    num_computed: int
    stop_at: int = 0  # a prompt chunk ends here if it would pass it (a snapshot point); 0: none
    num_drafts: int = 0  # of the known tokens, the last ones are drafts to verify
    num_prompt: int = 0  # a chunk that starts before it is the prompt's: it may be widened

    @property
    def num_missing(self) -> int:
        return self.num_known - self.num_computed


@dataclass(slots=True, frozen=True)
class Slice:
    """Compute tokens [start, start + count) of sequence `index`; `wants_logits` when the slice
    reaches the end of what the sequence knows, so the next token can be sampled."""

    index: int
    start: int  # before the sequence's computed tokens where a chunk is widened
    count: int
    wants_logits: bool
    is_verify: bool = False  # logits at every token: a decode token and its drafts


def plan_step(work: Sequence[Work], budget: int, can_widen: bool = False) -> list[Slice]:
    """Decoding sequences first, for latency (with their drafts, as many as the budget holds);
    then prompt chunks in the order given (oldest first) fill what is left of the token budget.
    A chunk never runs past its sequence's stop_at, so the KV cache holds exactly that prefix
    after the step. With `can_widen` (its KV can be cut back), a prompt chunk that would run
    narrow but costs more so than the tiled path starts earlier (exact_reuse.widened_start)."""
    if budget < 1:
        raise ValueError("the token budget must be at least 1")
    plan: list[Slice] = []
    left = budget
    for i, w in enumerate(work):
        if w.num_missing == 1 + w.num_drafts and left > 0:
            count = min(w.num_missing, left)
            plan.append(Slice(i, w.num_computed, count, True, is_verify=w.num_drafts > 0))
            left -= count
    for i, w in enumerate(work):
        if w.num_missing > 1 and w.num_drafts == 0 and left > 0:
            count = min(w.num_missing, left)
            if w.num_computed < w.stop_at:
                count = min(count, w.stop_at - w.num_computed)
            start, end = w.num_computed, w.num_computed + count
            if can_widen and start < w.num_prompt:
                # NOTE: by its prompt tokens alone, so that tokens a grammar forced after them
                # change nothing of how the prompt is computed; those still fit the budget
                prompt_end = min(end, w.num_prompt)
                start = widened_start(start, prompt_end, left - (end - prompt_end))
            plan.append(Slice(i, start, end - start, end == w.num_known))
            left -= end - start
    return plan
