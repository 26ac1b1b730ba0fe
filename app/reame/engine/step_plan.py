"""What one step will do, as a value: which tokens of which sequences go into the batch, what
kind each is (known, forced by a grammar, drafted), and where logits are read. The scheduler
makes it (make_plan), the runner computes it, the update applies it.

Packing the step (plan_step, on Work and Slice) is pure: there is no prefill/decode branch.
Every sequence has tokens it knows and tokens already in the KV cache, and a step computes part
of the difference for many sequences at once.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass

import numpy as np

from reame.engine.exact_reuse import widened_start
from reame.engine.sequence import Sequence


@dataclass(slots=True, frozen=True)
class Part:
    """Compute `tokens` of `seq` from position `start`: its known tokens first (prompt or
    taken; the last `num_forced` of those a grammar forced), then `num_drafts` drafts."""

    seq: Sequence
    start: int
    tokens: tuple[int, ...]
    num_drafts: int
    num_forced: int
    wants_logits: bool  # at its last token (to sample the next), or at every one (a verify)
    first_row: int  # the batch index of its first token

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)

    @property
    def is_verify(self) -> bool:
        return self.num_drafts > 0

    @property
    def num_prompt_tokens(self) -> int:
        """How many of its tokens are the prompt's (prefill, as opposed to decode)."""
        return max(0, min(self.end, self.seq.num_prompt) - self.start)

    def logit_rows(self) -> range:
        """The batch indices whose logits it reads, in order."""
        if not self.wants_logits:
            return range(0)
        end = self.first_row + len(self.tokens)
        return range(self.first_row, end) if self.is_verify else range(end - 1, end)


@dataclass(slots=True, frozen=True)
class StepPlan:
    parts: tuple[Part, ...]

    def __bool__(self) -> bool:
        return bool(self.parts)

    @property
    def num_tokens(self) -> int:
        return sum(len(p.tokens) for p in self.parts)

    def calls(self) -> list[StepPlan]:
        """The parts by their number of tokens, one llama_decode each, in slot order within
        each. llama.cpp cuts a batch of sequences in separate KV streams into ubatches of as
        many tokens of each: a decode token beside a 64-token prompt chunk takes one of its
        tokens along and leaves 63 to the narrow path (833 ms together on 2 cores, 484 ms
        apart), and those queries round otherwise than the chunk computed alone, which is what
        exact reuse and the verify probe assume (logits 0.48 apart, measured). Apart, each part
        is computed as it would be alone, in as many graph computes as llama.cpp's cut makes."""
        by_count: dict[int, list[Part]] = {}
        for part in self.parts:
            by_count.setdefault(len(part.tokens), []).append(part)
        return [StepPlan(tuple(parts)) for parts in by_count.values()]

    def batch(self) -> tuple[list[int], list[int], list[int], list[bool]]:
        """The llama batch: tokens, positions, sequence ids, and where logits are wanted."""
        tokens: list[int] = []
        positions: list[int] = []
        seq_ids: list[int] = []
        wants: list[bool] = []
        for part in self.parts:
            tokens.extend(part.tokens)
            positions.extend(range(part.start, part.end))
            seq_ids.extend([part.seq.slot] * len(part.tokens))
            rows = set(part.logit_rows())
            wants.extend(part.first_row + i in rows for i in range(len(part.tokens)))
        return tokens, positions, seq_ids, wants


Logits = Callable[[int], np.ndarray]  # a batch index's logits, after the step ran


def make_plan(running: list[Sequence], budget: int, can_widen: bool = False) -> StepPlan:
    """Pack the running sequences' missing tokens into one step (plan_step), in the
    order of their llama sequence ids. `can_widen`: their KV can be cut back, so that a narrow
    prompt chunk may be computed wider (a part then starts before its sequence's computed
    tokens, and the runner cuts them first)."""
    work = [
        Work(
            len(s.tokens) + len(s.drafts),
            s.num_computed,
            s.next_stop,
            len(s.drafts),
            s.num_prompt,
        )
        for s in running
    ]
    slices = plan_step(work, budget, can_widen)
    # NOTE: llama.cpp's per-sequence KV streams are much slower when a batch's sequence ids
    # are out of order (4 decode tokens: 19 ms in order, 30 ms reversed, measured here),
    # hence sorted batches and the lowest free slot first
    slices.sort(key=lambda s: running[s.index].slot)
    parts = []
    row = 0
    for s in slices:
        parts.append(_part(running[s.index], s, row))
        row += s.count
    return StepPlan(tuple(parts))


def _part(seq: Sequence, s: Slice, first_row: int) -> Part:
    known = seq.tokens + seq.drafts if seq.drafts else seq.tokens
    tokens = tuple(known[s.start : s.start + s.count])
    end = s.start + s.count
    num_drafts = max(0, end - len(seq.tokens))
    known_end, forced_start = end - num_drafts, len(seq.tokens) - seq.num_forced
    num_forced = max(0, known_end - max(s.start, forced_start))
    return Part(seq, s.start, tokens, num_drafts, num_forced, s.wants_logits, first_row)


# Packing a step (pure): which tokens of which sequences go into the next llama batch.


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


def plan_step(work: Seq[Work], budget: int, can_widen: bool = False) -> list[Slice]:
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
