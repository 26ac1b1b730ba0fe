"""Token sampling over one logits vector: pure numpy, no model needed.

Order of operations (as llama.cpp's default chain): logit bias, penalties, a grammar's mask of
allowed tokens (where a request has one), then either greedy argmax (temperature 0) or top-k,
temperature, top-p, min-p and a seeded draw.

The draw for the token at position n uses a random number of its own, made from the request's
seed and n alone. So the tokens are the same whether they come one step at a time or out of a
verify batch of drafts: verifying is comparing each draft with the token the sampler picks at
its position, for greedy and sampled requests alike. A draft d is then kept with probability
p(d), and where it is refused the pick is distributed as p without d, renormalised: speculative
sampling (Leviathan et al. 2023; Chen et al. 2023) for a deterministic drafter, whose proposal
is one-hot, with the output distributed exactly as the model's sampling.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from reame.speculation.verify import verify_drafts

MAX_STOP_STRINGS = 16
_FINITE = float(np.finfo(np.float32).max)

# a boolean mask over the vocabulary: the tokens a grammar allows next
Allowed = np.ndarray


class SamplingParams(BaseModel):
    """How to pick tokens for one sequence. Out-of-range values raise pydantic's ValidationError."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(0.8, ge=0.0, le=2.0)
    top_k: int = Field(40, ge=0, description="0 disables top-k")
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    min_p: float = Field(0.05, ge=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, lt=2**63)
    repetition_penalty: float = Field(1.0, gt=0.0, le=10.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    penalty_last_n: int = Field(64, ge=0, description="how many recent tokens the penalties see")
    logit_bias: dict[int, float] = Field(default_factory=dict)
    max_tokens: int = Field(256, ge=1)
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = Field(0, ge=0, le=20)
    ignore_eos: bool = False
    speculation: Literal["auto", "on", "off"] | None = None  # None: the server's setting

    @field_validator("logit_bias")
    @classmethod
    def _bias_in_range(cls, bias: dict[int, float]) -> dict[int, float]:
        for token, value in bias.items():
            if token < 0:
                raise ValueError(f"token id {token} is negative")
            if not -100.0 <= value <= 100.0:
                raise ValueError(f"bias {value} for token {token} is outside [-100, 100]")
        return bias

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, stop: tuple[str, ...]) -> tuple[str, ...]:
        if len(stop) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings, got {len(stop)}")
        if any(s == "" for s in stop):
            raise ValueError("stop strings must not be empty")
        return stop

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def has_penalties(self) -> bool:
        return (
            self.repetition_penalty != 1.0
            or self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
        ) and self.penalty_last_n > 0


@dataclass(slots=True, frozen=True)
class Sampled:
    token: int
    logprob: float | None = None
    top_logprobs: tuple[tuple[int, float], ...] = ()


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - np.max(logits)
    return shifted - np.log(np.sum(np.exp(shifted)))


def apply_penalties(
    logits: np.ndarray,
    recent: Sequence[int],
    repetition: float,
    presence: float,
    frequency: float,
) -> None:
    """In place. Repetition as llama.cpp (divide positive logits, multiply negative ones);
    presence and frequency as OpenAI (subtract once per seen token, and per occurrence)."""
    if not recent:
        return
    tokens, counts = np.unique(np.asarray(recent, dtype=np.int64), return_counts=True)
    values = logits[tokens]
    if repetition != 1.0:
        with np.errstate(over="ignore", divide="ignore"):
            values = np.where(values > 0, values / repetition, values * repetition)
    values = values - presence - frequency * counts
    logits[tokens] = values


def keep_top_candidates(
    logits: np.ndarray, top_k: int, top_p: float, min_p: float, temperature: float
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate token ids and their probabilities after top-k, temperature, top-p and min-p."""
    if 0 < top_k < logits.size:
        ids = np.argpartition(logits, -top_k)[-top_k:]
    else:
        ids = np.arange(logits.size)
    ids = ids[np.argsort(logits[ids])[::-1]]
    head = logits[ids].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = head / temperature
    if not np.isfinite(scaled[0]):
        # NOTE: a temperature so small (5e-324) that logits / T overflow: inf - inf would be
        # NaN and keep nothing; it is greedy, ties shared
        scaled = np.where(head == head[0], 0.0, -np.inf)
    probs = np.exp(scaled - scaled[0])
    probs /= probs.sum()
    if top_p < 1.0:
        # keep the smallest head whose mass reaches top_p (always at least one token)
        cut = int(np.searchsorted(np.cumsum(probs), top_p)) + 1
        ids, probs = ids[:cut], probs[:cut]
    keep = probs >= min_p * probs[0] if min_p > 0.0 else probs > 0.0  # masked: probability 0
    ids, probs = ids[keep], probs[keep]
    return ids, probs / probs.sum()


class Sampler:
    """Picks the next token of one sequence. Holds the sequence's random generator, so a fixed
    seed gives the same draws for the same logits."""

    def __init__(self, params: SamplingParams, vocab_size: int) -> None:
        too_big = [t for t in params.logit_bias if t >= vocab_size]
        if too_big:
            raise ValueError(
                f"logit_bias token id {too_big[0]} is out of range (vocab size {vocab_size})"
            )
        self.params = params
        self.vocab_size = vocab_size
        self._seed = params.seed if params.seed is not None else int(secrets.randbits(63))
        self._bias_ids = np.fromiter(params.logit_bias.keys(), dtype=np.int64)
        self._bias_values = np.fromiter(params.logit_bias.values(), dtype=np.float32)
        self._is_plain_greedy = (
            params.is_greedy and not params.has_penalties and not params.logit_bias
        )

    def sample(
        self, logits: np.ndarray, history: Sequence[int], allowed: Allowed | None = None
    ) -> Sampled:
        """The token after `history` (the sequence's tokens so far), one of `allowed` if given;
        `logits` is only read."""
        p = self.params
        if self._is_plain_greedy and not p.logprobs and allowed is None:
            return Sampled(int(np.argmax(logits)))
        processed = self._processed(logits, history, allowed)
        return self._described(self._pick(processed, len(history)), processed)

    def verify(
        self,
        drafts: Sequence[int],
        logits_at: Callable[[int], np.ndarray],
        history: list[int],
        allowed_at: Callable[[int], Allowed] | None = None,
    ) -> list[Sampled]:
        """The drafts to keep and the model's own token after them, given the logits at each
        of the len(drafts) + 1 positions of a verify batch (position i follows `history` and
        drafts[:i]), and under a grammar the tokens it allows there: exactly the tokens
        `sample` would give one step at a time."""
        p = self.params

        def processed(i: int) -> np.ndarray:
            return self._processed(logits_at(i), seen(i), allowed_at(i) if allowed_at else None)

        def seen(i: int) -> Sequence[int]:
            if not p.has_penalties:
                return history
            return history[-p.penalty_last_n :] + list(drafts[:i])

        def pick(i: int) -> int:
            if self._is_plain_greedy and allowed_at is None:
                return int(np.argmax(logits_at(i)))
            return self._pick(processed(i), len(history) + i)

        tokens = verify_drafts(drafts, pick)
        if not p.logprobs:
            return [Sampled(t) for t in tokens]
        return [self._described(t, processed(i)) for i, t in enumerate(tokens)]

    def _pick(self, processed: np.ndarray, position: int) -> int:
        p = self.params
        if p.is_greedy:
            return int(np.argmax(processed))
        ids, probs = keep_top_candidates(processed, p.top_k, p.top_p, p.min_p, p.temperature)
        u = np.random.default_rng((self._seed, position)).random()
        return int(ids[min(int(np.searchsorted(np.cumsum(probs), u, side="right")), ids.size - 1)])

    def _described(self, token: int, processed: np.ndarray) -> Sampled:
        """The token with its logprobs, when they are asked for."""
        p = self.params
        if not p.logprobs:
            return Sampled(token)
        logp = log_softmax(processed.astype(np.float64))
        top: tuple[tuple[int, float], ...] = ()
        if p.top_logprobs:
            best = np.argpartition(logp, -p.top_logprobs)[-p.top_logprobs :]
            best = best[np.argsort(logp[best])[::-1]]
            top = tuple((int(t), float(logp[t])) for t in best)
        return Sampled(token, float(logp[token]), top)

    def _processed(
        self, logits: np.ndarray, history: Sequence[int], allowed: Allowed | None = None
    ) -> np.ndarray:
        p = self.params
        if not p.logit_bias and not p.has_penalties:
            return logits if allowed is None else np.where(allowed, logits, -np.inf)
        out = np.array(logits, dtype=np.float32, copy=True)
        if p.logit_bias:
            out[self._bias_ids] += self._bias_values
        if p.has_penalties:
            recent = history[-p.penalty_last_n :]
            apply_penalties(
                out, recent, p.repetition_penalty, p.presence_penalty, p.frequency_penalty
            )
            # NOTE: a tiny repetition penalty divides a logit to infinity: keep them finite
            np.clip(out, -_FINITE, _FINITE, out=out)
        if allowed is not None:
            out[~allowed] = -np.inf
        return out
