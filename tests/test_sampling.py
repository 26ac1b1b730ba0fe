from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from reame.sampling import (
    Sampler,
    SamplingParams,
    apply_penalties,
    keep_top_candidates,
    log_softmax,
)


def logits_of(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_greedy_takes_the_largest_logit() -> None:
    s = Sampler(SamplingParams(temperature=0.0), vocab_size=4)
    assert s.sample(logits_of([0.1, 3.0, 2.9, -1.0]), []).token == 1


def test_greedy_does_not_write_the_logits() -> None:
    logits = logits_of([0.1, 3.0, 2.9, -1.0])
    s = Sampler(SamplingParams(temperature=0.0, logit_bias={0: 50.0}, presence_penalty=1.0), 4)
    assert s.sample(logits, [1]).token == 0
    assert logits.tolist() == pytest.approx([0.1, 3.0, 2.9, -1.0])


def test_logit_bias_can_forbid_the_best_token() -> None:
    s = Sampler(SamplingParams(temperature=0.0, logit_bias={1: -100.0}), vocab_size=4)
    assert s.sample(logits_of([0.1, 3.0, 2.9, -1.0]), []).token == 2


def test_top_k_one_is_greedy_whatever_the_temperature() -> None:
    s = Sampler(SamplingParams(temperature=2.0, top_k=1, seed=1), vocab_size=5)
    logits = logits_of([1.0, 2.0, 5.0, 4.9, 0.0])
    assert {s.sample(logits, []).token for _ in range(50)} == {2}


def test_top_p_keeps_the_smallest_head_reaching_the_mass() -> None:
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    ids, probs = keep_top_candidates(logits, top_k=0, top_p=0.8, min_p=0.0, temperature=1.0)
    assert ids.tolist() == [0, 1]
    assert probs.tolist() == pytest.approx([0.625, 0.375])


def test_min_p_drops_tokens_far_below_the_best() -> None:
    logits = np.log(np.array([0.6, 0.3, 0.05, 0.05], dtype=np.float32))
    ids, _ = keep_top_candidates(logits, top_k=0, top_p=1.0, min_p=0.2, temperature=1.0)
    assert sorted(ids.tolist()) == [0, 1]


def test_sampling_follows_the_distribution() -> None:
    logits = np.log(np.array([0.7, 0.2, 0.1], dtype=np.float32))
    s = Sampler(SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=3), 3)
    # each position has its own draw
    draws = [s.sample(logits, [0] * n).token for n in range(6000)]
    draws = np.bincount(draws, minlength=3) / 6000
    assert draws == pytest.approx([0.7, 0.2, 0.1], abs=0.03)


def test_the_same_seed_gives_the_same_draws() -> None:
    rng = np.random.default_rng(0)
    steps = [rng.standard_normal(100).astype(np.float32) for _ in range(30)]
    params = SamplingParams(temperature=1.0, seed=42)
    a = [Sampler(params, 100).sample(x, []).token for x in steps]
    b = [Sampler(params, 100).sample(x, []).token for x in steps]
    c = [Sampler(params.model_copy(update={"seed": 43}), 100).sample(x, []).token for x in steps]
    assert a == b
    assert a != c


def test_penalties_follow_llama_cpp_and_openai() -> None:
    logits = logits_of([2.0, -2.0, 1.0, 0.5])
    apply_penalties(logits, [0, 1, 0], repetition=2.0, presence=0.5, frequency=0.25)
    # token 0: 2/2 - 0.5 - 2*0.25; token 1: -2*2 - 0.5 - 0.25; others untouched
    assert logits.tolist() == pytest.approx([0.0, -4.75, 1.0, 0.5])


def test_logprobs_are_normalised_and_the_top_ones_sorted() -> None:
    s = Sampler(SamplingParams(temperature=0.0, logprobs=True, top_logprobs=2), vocab_size=4)
    out = s.sample(logits_of([1.0, 3.0, 2.0, 0.0]), [])
    expected = log_softmax(np.array([1.0, 3.0, 2.0, 0.0]))
    assert out.token == 1
    assert out.logprob == pytest.approx(expected[1])
    assert [t for t, _ in out.top_logprobs] == [1, 2]
    assert np.exp(expected).sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"temperature": -0.1},
        {"temperature": 2.5},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"min_p": -1},
        {"top_k": -1},
        {"presence_penalty": 3},
        {"frequency_penalty": -2.5},
        {"repetition_penalty": 0},
        {"max_tokens": 0},
        {"top_logprobs": 21},
        {"logit_bias": {5: 101.0}},
        {"logit_bias": {-1: 1.0}},
        {"stop": ("",)},
        {"seed": -1},
        {"unknown_option": 1},
    ],
)
def test_out_of_range_values_are_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        SamplingParams(**bad)


def test_logit_bias_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="out of range"):
        Sampler(SamplingParams(logit_bias={10: 1.0}), vocab_size=10)


# -- verifying drafts: the same choices as sampling one token at a time ----------------------

ROWS = np.array(
    [[1.0, 0.2, 2.0, -1.0, 0.5], [0.3, 1.5, -0.5, 0.9, 1.1], [2.2, 0.0, 0.4, 0.4, -2.0]],
    dtype=np.float32,
)
HISTORY = [1, 1, 4]


def test_greedy_verify_with_penalties_agrees_with_sampling_step_by_step() -> None:
    params = SamplingParams(temperature=0.0, repetition_penalty=1.5, logprobs=True)
    sampler = Sampler(params, 5)
    drafts = [2, 1]
    kept = sampler.verify(drafts, lambda i: ROWS[i], list(HISTORY))
    expected, history = [], list(HISTORY)
    for i in range(len(drafts) + 1):
        step = sampler.sample(ROWS[i], history)
        expected.append(step)
        if i == len(drafts) or step.token != drafts[i]:
            break
        history.append(step.token)
    assert kept == expected
    assert kept[0].token == 2 and kept[0].logprob is not None


def test_sampled_verify_keeps_the_distribution_of_sampling() -> None:
    from scipy.stats import chisquare

    params = SamplingParams(
        temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.3, seed=7
    )
    sampler = Sampler(params, 5)
    first = np.zeros(5)
    second = np.zeros(5)  # the token after the first draft, when it was kept
    for seed in range(20000):
        sampler = Sampler(params.model_copy(update={"seed": seed}), 5)
        kept = sampler.verify([2, 3], lambda i: ROWS[i], list(HISTORY))
        first[kept[0].token] += 1
        if kept[0].token == 2:
            second[kept[1].token] += 1
    processed = [sampler._processed(ROWS[0], HISTORY), sampler._processed(ROWS[1], HISTORY + [2])]
    for counts, logits in zip((first, second), processed, strict=True):
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        assert chisquare(counts, counts.sum() * probs).pvalue > 1e-4


def test_a_subnormal_temperature_or_penalty_still_picks_a_token() -> None:
    # NOTE: a 500 before (logits / 5e-324 overflowed to inf, inf - inf is NaN, nothing was kept)
    logits = np.array([3.0, 1.0, 2.5, -1.0], dtype=np.float32)
    for params in (
        SamplingParams(temperature=5e-324, seed=1),
        SamplingParams(temperature=0.7, repetition_penalty=1e-310, seed=1),
    ):
        token = Sampler(params, 4).sample(logits, [0, 2])
        assert 0 <= token.token < 4


@given(st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.7, 1.5]))
def test_a_mask_leaves_only_its_tokens_to_pick(seed: int, temperature: float) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=64).astype(np.float32)
    allowed = rng.random(64) < 0.1
    allowed[rng.integers(64)] = True
    params = SamplingParams(temperature=temperature, seed=seed, top_k=0, top_p=1.0, min_p=0.0)
    sampler = Sampler(params, 64)
    for position in range(5):
        assert allowed[sampler.sample(logits, [1] * position, allowed).token]


def test_verify_under_a_mask_picks_what_sampling_under_it_picks() -> None:
    rng = np.random.default_rng(3)
    rows = [rng.normal(size=32).astype(np.float32) for _ in range(4)]
    masks = [rng.random(32) < 0.3 for _ in range(4)]
    for mask in masks:
        mask[0] = True
    sampler = Sampler(SamplingParams(temperature=0.9, seed=11), 32)
    history = [5, 6]
    one_at_a_time = []
    for i in range(4):
        one_at_a_time.append(sampler.sample(rows[i], history + one_at_a_time, masks[i]).token)
    drafts = one_at_a_time[:3]
    kept = sampler.verify(drafts, lambda i: rows[i], history, lambda i: masks[i])
    assert [s.token for s in kept] == one_at_a_time
