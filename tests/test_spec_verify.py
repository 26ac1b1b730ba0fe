"""Verification of drafts, model-free: greedy keeps the agreed run; sampled requests keep the
model's output distribution exactly (a chi-square test over a toy model, many samples)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from reame.sampling import Sampler, SamplingParams
from reame.speculation.verify import verify_drafts


def test_the_agreed_run_is_kept_then_the_models_own_token() -> None:
    assert verify_drafts([5, 6, 7], [5, 6, 9, 4].__getitem__) == [5, 6, 9]
    assert verify_drafts([5, 6, 7], [5, 6, 7, 4].__getitem__) == [5, 6, 7, 4]  # all, plus one
    assert verify_drafts([5, 6], [1, 6, 7].__getitem__) == [1]
    assert verify_drafts([], [3].__getitem__) == [3]


def test_picks_after_the_first_refusal_are_never_computed() -> None:
    asked: list[int] = []

    def pick(i: int) -> int:
        asked.append(i)
        return [5, 8, 7, 4][i]

    assert verify_drafts([5, 6, 7], pick) == [5, 8]
    assert asked == [0, 1]


VOCAB = 5
RNG = np.random.default_rng(1234)
# a toy model: the next token's distribution depends on the previous one
P = RNG.dirichlet(np.ones(VOCAB) * 0.8, size=VOCAB)
Q = RNG.dirichlet(np.ones(VOCAB) * 0.8, size=VOCAB)  # a drafter that is often wrong
PARAMS = SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)


def first_two(seed: int) -> tuple[int, int]:
    """Two tokens after token 0: three drafts (the drafter's most likely tokens), verified,
    then one more step if the verify gave only one."""
    drafts, prev = [], 0
    for _ in range(3):
        prev = int(np.argmax(Q[prev]))
        drafts.append(prev)
    sampler = Sampler(PARAMS.model_copy(update={"seed": seed}), VOCAB)
    logits = [np.log(P[t]).astype(np.float32) for t in [0, *drafts]]
    out = [s.token for s in sampler.verify(drafts, logits.__getitem__, [0])]
    if len(out) == 1:
        out.append(sampler.sample(np.log(P[out[0]]).astype(np.float32), [0, out[0]]).token)
    return out[0], out[1]


def test_speculative_sampling_keeps_the_models_distribution() -> None:
    n = 40_000
    counts = np.zeros((VOCAB, VOCAB))
    for seed in range(n):
        a, b = first_two(seed)
        counts[a, b] += 1
    expected = P[0][:, None] * P * n  # P(a | 0) * P(b | a)
    _, p_value = chisquare(counts.ravel(), expected.ravel())
    assert p_value > 0.001, (counts, expected)


def test_a_draft_is_kept_with_the_models_probability_of_it() -> None:
    draft = int(np.argmax(Q[0]))
    logits = np.log(P[0]).astype(np.float32)
    n = 20_000
    kept = sum(
        Sampler(PARAMS.model_copy(update={"seed": s}), VOCAB)
        .verify([draft], [logits, logits].__getitem__, [0])[0]
        .token
        == draft
        for s in range(n)
    )
    assert kept / n == pytest.approx(P[0][draft], abs=0.015)


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


def test_sampled_verification_gives_the_tokens_of_one_step_at_a_time() -> None:
    """So a seeded request gives the same text with speculation on and off."""
    rows = [np.log(P[t]).astype(np.float32) for t in range(VOCAB)]
    for seed in range(200):
        sampler = Sampler(PARAMS.model_copy(update={"seed": seed}), VOCAB)
        history, steps = [0], []
        for _ in range(4):
            steps.append(sampler.sample(rows[history[-1]], history).token)
            history.append(steps[-1])
        drafts = steps[:2] + [(steps[2] + 1) % VOCAB]  # two right, then a wrong one
        batch = [rows[t] for t in [0, *drafts]]
        out = [s.token for s in sampler.verify(drafts, batch.__getitem__, [0])]
        assert out == steps[:3]
