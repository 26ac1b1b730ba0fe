"""Verifying a run of draft tokens: pure, model-free.

Position i of a verify batch gives the model's pick after the sequence plus drafts[:i] (its
argmax, or its sampled token: see reame.sampling for why a sampled pick can be compared as
well). The run is kept up to the first draft that differs from the pick, and the pick there,
or after the last draft, is the model's own next token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def verify_drafts(drafts: Sequence[int], pick: Callable[[int], int]) -> list[int]:
    """`pick(i)`: the model's token at position i, asked only as far as the drafts agree (a
    pick may cost a sort of the vocabulary). Returns the agreed drafts and one token more."""
    out: list[int] = []
    for i, draft in enumerate(drafts):
        token = pick(i)
        if token != draft:
            out.append(token)
            return out
        out.append(draft)
    out.append(pick(len(drafts)))
    return out
