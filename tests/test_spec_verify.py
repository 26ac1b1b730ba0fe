"""Draft verification, model-free: greedy keeps exactly what the model agrees with; speculative
sampling gives tokens distributed exactly as the model's own sampling (a chi-square test over
many draws)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from reame.spec.verify import Candidates, verify_greedy, verify_sampled


def test_greedy_keeps_the_agreed_drafts_then_the_models_token() -> None:
    assert verify_greedy([5, 6, 7], [5, 6, 9, 4]) == [5, 6, 9]
    assert verify_greedy([5, 6, 7], [5, 6, 7, 4]) == [5, 6, 7, 4]  # all kept, plus one
    assert verify_greedy([5, 6], [1, 6, 7]) == [1]
    assert verify_greedy([], [3]) == [3]


def test_a_wrong_number_of_targets_is_refused() -> None:
    with pytest.raises(ValueError, match="need 3 targets"):
        verify_greedy([1, 2], [1, 2])
    with pytest.raises(ValueError, match="need 2 targets"):
        verify_sampled([1], [], np.random.default_rng(0))


VOCAB = 5
RNG = np.random.default_rng(1234)
# a toy model: the next token's distribution depends on the previous one
P = RNG.dirichlet(np.ones(VOCAB) * 0.8, size=VOCAB)
Q = RNG.dirichlet(np.ones(VOCAB) * 0.8, size=VOCAB)  # a drafter that is often wrong


def dist(row: np.ndarray) -> Candidates:
    ids = np.flatnonzero(row > 0)
    return Candidates(ids, row[ids] / row[ids].sum())


def first_two(rng: np.random.Generator, drafter: str) -> tuple[int, int]:
    """Two tokens after token 0: drafted (3 at a time), verified, then sampled on if short."""
    drafts, proposals, prev = [], [], 0
    for _ in range(3):
        if drafter == "sampled":
            proposals.append(dist(Q[prev]))
            prev = int(rng.choice(VOCAB, p=Q[prev]))
        else:  # deterministic: always the drafter's most likely token
            prev = int(np.argmax(Q[prev]))
        drafts.append(prev)
    targets = [dist(P[t]) for t in [0, *drafts]]
    out = verify_sampled(drafts, targets, rng, proposals if drafter == "sampled" else None)
    if len(out) == 1:
        out.append(int(rng.choice(VOCAB, p=P[out[0]])))
    return out[0], out[1]


@pytest.mark.parametrize("drafter", ["sampled", "deterministic"])
def test_speculative_sampling_keeps_the_models_distribution(drafter: str) -> None:
    rng = np.random.default_rng(7)
    n = 40_000
    counts = np.zeros((VOCAB, VOCAB))
    for _ in range(n):
        a, b = first_two(rng, drafter)
        counts[a, b] += 1
    expected = P[0][:, None] * P * n  # P(a | 0) * P(b | a)
    _, p_value = chisquare(counts.ravel(), expected.ravel())
    assert p_value > 0.001, (counts, expected)


def test_the_test_would_see_a_biased_sampler() -> None:
    """The same check refuses a verifier that keeps every draft (the drafter's distribution)."""
    rng = np.random.default_rng(7)
    n = 40_000
    counts = np.zeros((VOCAB, VOCAB))
    for _ in range(n):
        a = int(rng.choice(VOCAB, p=Q[0]))
        b = int(rng.choice(VOCAB, p=Q[a]))
        counts[a, b] += 1
    expected = P[0][:, None] * P * n
    assert chisquare(counts.ravel(), expected.ravel())[1] < 1e-6


def test_a_draft_outside_the_models_candidates_is_never_kept() -> None:
    rng = np.random.default_rng(0)
    target = Candidates(np.array([1, 2]), np.array([0.5, 0.5]))
    for _ in range(200):
        out = verify_sampled([9], [target, target], rng)
        assert out[0] in (1, 2) and len(out) == 1
