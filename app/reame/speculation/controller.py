"""Whether speculation pays, measured where it runs: pure, model-free.

For a draft run of k tokens the engine pays a verify batch instead of a plain step. The
controller keeps what a step of b tokens costs here (a moving average a batch size, measured
every step; until a size is measured, b^0.75 times a one-token step, about what these machines
showed) and, per drafter, how often a draft token is accepted (a moving average of the
per-token acceptance) and what proposing a token costs (nothing for a lookup, a step of its own
for a draft model; where memory cannot be cut back, a checkpoint and the tokens a rollback
computes again). A run of k drafts accepted token by token with probability a yields
(1 - a^(k+1)) / (1 - a) tokens, so it picks the k that gives most tokens a second, 0 when no k
beats a plain step. A drafter at k = 0 is probed now and then with a short run, so it comes
back when the traffic changes.

A request decides on its own runs too (`RequestStats`, kept on its sequence): the drafter-wide
acceptance is the prior, worth PRIOR_TRIALS drafts, of a Beta-like estimate that its own kept
and refused drafts move, each fading as later ones come. A request on a subject the archive has
seen drafts long after a few runs, a novel one stops after one or two, whatever the other
requests do. The drafter-wide figure is still moved by every run: it is what a new request
starts from, what the gauge shows, and whether a drafter is off and probed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# NOTE: at most 48: llama.cpp's CPU flash attention takes another path (other rounding) for 64
# or more queries of a sequence, and greedy output would no longer be the same as without drafts
LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)
SMOOTHING = 0.1
MAX_STEP_CHANGE = 2.0
PROBE_EVERY = 128  # decisions at k = 0 between two probes (a probe costs: 1% at most)
PROBE_LENGTH = 2
# the share of the steps between two probes that drafting a probe may cost: a draft model first
# catches up on what the sequence said since its last probe, so its probes are spaced out more
PROBE_SHARE = 0.01
PROBE_SOON = 8  # decisions to the next probe after one whose drafts were all kept
# a request's own estimate: a Beta whose prior is the drafter-wide acceptance worth PRIOR_TRIALS
# drafts, all of it (the prior too) fading by 1/REQUEST_MEMORY with each draft verified, so that
# a request's own drafts soon outweigh the others' and it follows a request that goes from a
# part it repeats to one it does not
PRIOR_TRIALS = 4.0
REQUEST_MEMORY = 12.0


@dataclass(slots=True)
class RequestStats:
    """One request's own verify runs of one drafter: its drafts kept and refused, faded."""

    kept: float = 0.0
    refused: float = 0.0
    prior_weight: float = PRIOR_TRIALS

    def record(self, proposed: int, accepted: int) -> None:
        for _ in range(accepted):
            self._trial(1.0, 0.0)
        if accepted < proposed:
            self._trial(0.0, 1.0)

    def estimate(self, prior: float) -> float:
        """The chance that its next draft is kept, `prior` being the drafter-wide figure."""
        weight = self.prior_weight
        return (weight * prior + self.kept) / (weight + self.kept + self.refused)

    def _trial(self, kept: float, refused: float) -> None:
        fade = 1.0 - 1.0 / REQUEST_MEMORY
        self.kept = self.kept * fade + kept
        self.refused = self.refused * fade + refused
        self.prior_weight *= fade


# a request's own figures, by drafter (none yet: the drafter-wide ones)
OwnStats = Mapping[str, RequestStats]


@dataclass(slots=True)
class DrafterStats:
    # optimistic at first, so a new drafter gets tried (at 0.8 a 2-token run pays where a
    # 3-token batch costs 2.3 steps, as here); a wrong one falls below in a few runs
    acceptance: float = 0.8
    is_enabled: bool = True
    skipped: int = 0
    runs: int = 0  # verify runs of its drafts
    proposed: int = 0
    accepted: int = 0
    seconds_per_draft: float = 0.0  # what proposing costs, a token (a draft model's steps)
    probe_seconds: float = 0.0  # what a probe's proposal cost (a draft model catches up first)
    is_probing: bool = False


@dataclass(slots=True)
class SpecController:
    mode: str = "auto"  # auto | on | off
    max_length: int = 32
    # the first position a verify run may not reach and stay exact (engine/exact_run.py); None:
    # any
    exact_until: int | None = None
    step_seconds: dict[int, float] = field(default_factory=dict)
    drafters: dict[str, DrafterStats] = field(default_factory=dict)
    # memory that cannot be cut back (recurrent layers): each verify run is checkpointed
    # first, and a run with refused drafts is rolled back and its kept tokens computed again
    uses_checkpoints: bool = False
    checkpoint_seconds: float = 0.0  # what a checkpoint costs, a verify run
    replayed_tokens: int = 0  # computed again after a rollback, in all

    # -- what it measures --------------------------------------------------------------------

    def record_step(self, num_tokens: int, seconds: float) -> None:
        """One step's time counts for at most twice (or half) what the size was thought to
        cost: on a shared host one step now and then waits seconds for the CPU, and an average
        it dragged up would turn drafting off for hundreds of steps."""
        old = self.step_seconds.get(num_tokens)
        if old is None and not self.step_seconds:
            self.step_seconds[num_tokens] = seconds
            return
        expected = old if old is not None else self._cost(num_tokens)
        seconds = min(max(seconds, expected / MAX_STEP_CHANGE), expected * MAX_STEP_CHANGE)
        self.step_seconds[num_tokens] = (
            seconds if old is None else old + SMOOTHING * (seconds - old)
        )

    def record_drafts(
        self,
        drafter: str,
        proposed: int,
        accepted: int,
        own: dict[str, RequestStats] | None = None,
    ) -> None:
        """`accepted` of the `proposed` drafts were kept (a run stops at the first refusal);
        `own`: the figures of the request whose run it was, moved too."""
        if proposed <= 0:
            return
        if own is not None:
            own.setdefault(drafter, RequestStats()).record(proposed, accepted)
        stats = self._stats(drafter)
        stats.runs += 1
        stats.proposed += proposed
        stats.accepted += accepted
        # each draft tried is one Bernoulli trial: the kept ones, then the refused one
        for _ in range(accepted):
            stats.acceptance += SMOOTHING * (1.0 - stats.acceptance)
        if accepted < proposed:
            stats.acceptance -= SMOOTHING * stats.acceptance
        elif not stats.is_enabled:  # a probe that was right: the next one comes soon
            stats.skipped = max(stats.skipped, self.probe_interval(drafter) - PROBE_SOON)

    def record_proposal(self, drafter: str, seconds: float, count: int) -> None:
        """Proposing `count` tokens took `seconds`."""
        if count > 0:
            stats = self._stats(drafter)
            stats.seconds_per_draft += SMOOTHING * (seconds / count - stats.seconds_per_draft)
            if stats.is_probing:
                stats.is_probing = False
                stats.probe_seconds += 0.5 * (seconds - stats.probe_seconds)

    def record_checkpoint(self, seconds: float) -> None:
        """Checkpointing one sequence before its verify run took `seconds`."""
        self.uses_checkpoints = True
        self.checkpoint_seconds += SMOOTHING * (seconds - self.checkpoint_seconds)

    def record_replay(self, num_tokens: int) -> None:
        """A rollback: `num_tokens` kept tokens are computed again."""
        self.replayed_tokens += num_tokens

    # -- what it decides ---------------------------------------------------------------------

    def draft_length(
        self, drafter: str, batch_tokens: int, mode: str | None = None, own: OwnStats | None = None
    ) -> int:
        """How many drafts of this drafter to verify beside `batch_tokens` other tokens for a
        request whose own figures are `own` (`mode`: its own choice, over the server's)."""
        mode = mode or self.mode
        if mode == "on":
            return self.max_length
        if mode == "off":
            return 0
        stats = self._stats(drafter)
        shared = self.best_length(stats.acceptance, batch_tokens, stats.seconds_per_draft)
        # NOTE: on or off by the drafter-wide figure alone: the gauge and the log say what a
        # new request gets, and do not flicker from one request's figures to another's
        stats.is_enabled = shared > 0
        acceptance = self.acceptance(drafter, own)
        best = shared
        if acceptance != stats.acceptance:
            best = self.best_length(acceptance, batch_tokens, stats.seconds_per_draft)
        if best == 0:
            stats.skipped += 1
            if stats.skipped >= self.probe_interval(drafter):
                stats.skipped = 0
                stats.is_probing = True
                return min(PROBE_LENGTH, self.max_length)
        return best

    def probe_interval(self, drafter: str) -> int:
        """Decisions at k = 0 between two probes of this drafter."""
        stats = self._stats(drafter)
        probe = max(stats.seconds_per_draft * PROBE_LENGTH, stats.probe_seconds)
        return max(PROBE_EVERY, math.ceil(probe / (PROBE_SHARE * self._cost(1))))

    def best_length(self, acceptance: float, batch_tokens: int, draft_seconds: float = 0.0) -> int:
        """The k that maximizes tokens a second for one sequence beside batch_tokens others,
        when proposing costs `draft_seconds` a token."""
        base = self._cost(batch_tokens + 1)
        best, best_rate = 0, 1.0 / base
        for k in LENGTHS:
            if k > self.max_length:
                break
            cost = self._cost(batch_tokens + 1 + k) + k * draft_seconds
            cost += self._rollback_cost([acceptance] * k, batch_tokens)
            rate = _expected_tokens(acceptance, k) / cost
            if rate > best_rate * 1.02:  # NOTE: a margin: noise must not switch it on
                best, best_rate = k, rate
        return best

    def rate(
        self, parts: Sequence[tuple[str, int]], batch_tokens: int, own: OwnStats | None = None
    ) -> float:
        """Tokens a second that verifying a run of drafts is expected to give one sequence
        beside `batch_tokens` others; `parts`: how many drafts of which drafter, in order."""
        expected, kept, proposing = 1.0, 1.0, 0.0
        chances: list[float] = []
        for drafter, count in parts:
            acceptance = self.acceptance(drafter, own)
            proposing += count * self._stats(drafter).seconds_per_draft
            chances += [acceptance] * count
            for _ in range(count):
                kept *= acceptance
                expected += kept
        rollback = self._rollback_cost(chances, batch_tokens)
        return expected / (self._cost(batch_tokens + 1 + len(chances)) + proposing + rollback)

    def is_probing(self, drafter: str) -> bool:
        """The last length asked of this drafter was a probe of a drafter that is off."""
        return self._stats(drafter).is_probing

    def is_enabled(self, drafter: str) -> bool:
        if self.mode != "auto":
            return self.mode == "on"
        return self._stats(drafter).is_enabled

    def order(self, names: list[str], own: OwnStats | None = None) -> list[str]:
        """Drafters to ask first: the best accepted."""
        return sorted(names, key=lambda n: -self.acceptance(n, own))

    def acceptance(self, drafter: str, own: OwnStats | None = None) -> float:
        """How often a draft of this drafter is kept: for a request with runs of its own, its
        estimate from them."""
        prior = self._stats(drafter).acceptance
        mine = own.get(drafter) if own else None
        return prior if mine is None else mine.estimate(prior)

    def _stats(self, drafter: str) -> DrafterStats:
        stats = self.drafters.get(drafter)
        if stats is None:
            stats = self.drafters[drafter] = DrafterStats()
        return stats

    def _rollback_cost(self, chances: list[float], batch_tokens: int) -> float:
        """Where memory cannot be cut: the checkpoint, and the tokens a refusal makes the next
        step compute again, at what a token adds to a step of this size (`chances`: each
        draft's chance of being kept, in order)."""
        k = len(chances)
        if not self.uses_checkpoints or k == 0:
            return 0.0
        per_token = (self._cost(batch_tokens + 1 + k) - self._cost(batch_tokens + 1)) / k
        return self.checkpoint_seconds + _replayed(chances) * max(per_token, 0.0)

    def _cost(self, num_tokens: int) -> float:
        measured = self.step_seconds.get(num_tokens)
        if measured is not None:
            return measured
        smaller = [(n, t) for n, t in self.step_seconds.items() if n < num_tokens]
        larger = [(n, t) for n, t in self.step_seconds.items() if n > num_tokens]
        if smaller or larger:  # scale from the nearest size measured, smaller ones first
            n, t = max(smaller) if smaller else min(larger)
            return t * (num_tokens / n) ** 0.75
        return num_tokens**0.75


def _expected_tokens(acceptance: float, k: int) -> float:
    """Tokens a verify of k drafts yields: the accepted run plus the model's own token."""
    if acceptance >= 1.0:
        return k + 1.0
    return (1.0 - acceptance ** (k + 1)) / (1.0 - acceptance)


def _replayed(chances: list[float]) -> float:
    """Tokens a verify run computes again after a rollback, on average: refused at draft j + 1
    (after j kept), its decode token and those j."""
    out, kept = 0.0, 1.0
    for j, chance in enumerate(chances):
        out += kept * (1.0 - chance) * (j + 1)
        kept *= chance
    return out
