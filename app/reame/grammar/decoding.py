"""A sequence under a grammar in the engine: the masks its sampler applies, the tokens the
grammar forces, and drafts cut to what the grammar accepts.

Forced tokens are known, not sampled: they are appended as a run that the next step computes in
one batch (logits only at its end, where a choice remains). With forced runs off they are still
taken without sampling, one a step, so the output is the same either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from reame import metrics
from reame.sampling import Allowed, Sampled

if TYPE_CHECKING:
    from reame.engine.sequence import Sequence  # NOTE: the grammar package needs no engine


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


def mask_at(seq: Sequence, drafts: list[int]) -> Callable[[int], Allowed]:
    """For verifying drafts under a grammar: the mask at position i of the verify run (after
    drafts[:i]), worked out on a copy of the matcher (the kept tokens are consumed by the
    sequence's own as they are taken). Past a draft that ends the answer any token is allowed:
    the answer ends there whatever follows."""
    assert seq.constraint is not None
    work = seq.constraint.copy()
    masks: dict[int, Allowed] = {}
    consumed = 0

    def allowed_at(i: int) -> Allowed:
        nonlocal consumed
        if i in masks:
            return masks[i]
        while consumed < i and not work.is_finished:
            if not work.consume(drafts[consumed : consumed + 1]):
                break
            consumed += 1
        if consumed < i or work.is_finished:
            masks[i] = np.ones(seq.sampler.vocab_size, dtype=bool)
        elif forced := work.forced():
            # NOTE: where the grammar forces a token, that token: as it is taken without drafts
            masks[i] = np.zeros(seq.sampler.vocab_size, dtype=bool)
            masks[i][forced[0]] = True
        else:
            masks[i] = work.allowed()
        return masks[i]

    return allowed_at


def cut_to_grammar(seq: Sequence, drafts: list[int]) -> list[int]:
    """The leading drafts the grammar accepts from where the sequence is."""
    if seq.constraint is None or not drafts:
        return drafts
    return drafts[: seq.constraint.valid_prefix(drafts)]
