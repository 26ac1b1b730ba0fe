"""Verifying a run of draft tokens against the model's distributions at each position: pure,
model-free.

Position i's target is the model's choice after the sequence plus drafts[:i]; a verify batch
gives k + 1 of them for k drafts. Greedy keeps the longest run of drafts the model agrees with,
then the model's own next token. Sampling uses speculative sampling (Leviathan et al. 2023;
Chen et al. 2023): draft d at i is kept with probability min(1, p(d) / q(d)); at the first
refusal the token is drawn from the residual max(p - q, 0), renormalised; when every draft is
kept, one more token is drawn from the last target. The tokens it returns are distributed
exactly as the model's own sampling would give them. A deterministic drafter is the case where
q puts all its mass on its draft.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(slots=True, frozen=True)
class Candidates:
    """A sparse distribution: token ids and their probabilities (summing to 1)."""

    ids: np.ndarray
    probs: np.ndarray

    def prob(self, token: int) -> float:
        hit = np.flatnonzero(self.ids == token)
        return float(self.probs[hit[0]]) if hit.size else 0.0


def verify_greedy(drafts: Sequence[int], targets: Sequence[int]) -> list[int]:
    """`targets[i]`: the model's argmax at position i (len(drafts) + 1 of them). Returns the
    tokens to keep: the agreed drafts, then the model's token where they part (or after all)."""
    if len(targets) != len(drafts) + 1:
        raise ValueError(f"{len(drafts)} drafts need {len(drafts) + 1} targets, not {len(targets)}")
    out: list[int] = []
    for draft, target in zip(drafts, targets, strict=False):
        if draft != target:
            break
        out.append(draft)
    out.append(int(targets[len(out)]))
    return out


def verify_sampled(
    drafts: Sequence[int],
    targets: Sequence[Candidates],
    rng: np.random.Generator,
    proposals: Sequence[Candidates] | None = None,
) -> list[int]:
    """`targets[i]`: the model's distribution at position i (len(drafts) + 1 of them);
    `proposals[i]`: the drafter's distribution that `drafts[i]` was drawn from, None for a
    deterministic drafter. Returns the kept drafts and one token drawn by the model."""
    if len(targets) != len(drafts) + 1:
        raise ValueError(f"{len(drafts)} drafts need {len(drafts) + 1} targets, not {len(targets)}")
    out: list[int] = []
    for i, draft in enumerate(drafts):
        p = targets[i]
        q = proposals[i] if proposals is not None else None
        q_draft = q.prob(draft) if q is not None else 1.0
        if q_draft > 0 and rng.random() * q_draft < p.prob(draft):
            out.append(draft)
            continue
        out.append(_draw_residual(p, q, draft, rng))
        return out
    last = targets[len(drafts)]
    out.append(int(last.ids[rng.choice(last.ids.size, p=last.probs)]))
    return out


def _draw_residual(
    p: Candidates, q: Candidates | None, draft: int, rng: np.random.Generator
) -> int:
    """A draw from max(p - q, 0), renormalised (for a one-hot q: p without the draft)."""
    if q is None:
        residual = np.where(p.ids == draft, 0.0, p.probs)
    else:
        q_on_p = np.array([q.prob(int(t)) for t in p.ids])
        residual = np.maximum(p.probs - q_on_p, 0.0)
    total = residual.sum()
    if total <= 0:  # p <= q everywhere p lives: only reachable by rounding; p itself is exact
        return int(p.ids[rng.choice(p.ids.size, p=p.probs)])
    return int(p.ids[rng.choice(p.ids.size, p=residual / total)])
