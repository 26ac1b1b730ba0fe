"""A sequence under a grammar in the engine: the masks its sampler applies, the tokens the
grammar forces, and drafts cut to what the grammar accepts.

Forced tokens are known, not sampled: they are appended as a run that the next step computes in
one batch (logits only at its end, where a choice remains). With forced runs off they are still
taken without sampling, one a step, so the output is the same either way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from reame import metrics
from reame.engine.sequence import Sequence
from reame.sampling import Allowed, Sampled


def take_forced(seq: Sequence, whole_run: bool) -> list[Sampled]:
    """The tokens the grammar forces next: all of them, or only the first (forced runs off)."""
    constraint = seq.constraint
    if constraint is None or constraint.is_finished:
        return []
    forced = constraint.forced()
    if not whole_run:
        forced = forced[:1]
    metrics.GRAMMAR_FORCED_TOKENS.inc(len(forced))
    logprob = 0.0 if seq.request.params.logprobs else None  # NOTE: the only token it allows
    return [Sampled(token, logprob) for token in forced]


def mask_at(
    seq: Sequence, drafts: list[int]
) -> tuple[Callable[[int], Allowed], Callable[[], None]]:
    """For verifying drafts under a grammar: the mask at position i of the verify run (after
    drafts[:i]), and a call that rolls the matcher back to where it was (the kept tokens are
    then consumed one by one as they are taken)."""
    constraint = seq.constraint
    assert constraint is not None
    masks: dict[int, Allowed] = {}
    consumed = 0

    def allowed_at(i: int) -> Allowed:
        nonlocal consumed
        if i not in masks:
            if i > consumed:
                constraint.consume(drafts[consumed:i])
                consumed = i
            # NOTE: where the grammar forces a token, that token: as it is taken without drafts
            forced = constraint.forced()
            if forced:
                masks[i] = np.zeros(seq.sampler.vocab_size, dtype=bool)
                masks[i][forced[0]] = True
            else:
                masks[i] = constraint.allowed()
        return masks[i]

    def rewind() -> None:
        constraint.rollback(consumed)

    return allowed_at, rewind


def cut_to_grammar(seq: Sequence, drafts: list[int]) -> list[int]:
    """The leading drafts the grammar accepts from where the sequence is."""
    if seq.constraint is None or not drafts:
        return drafts
    return drafts[: seq.constraint.valid_prefix(drafts)]
