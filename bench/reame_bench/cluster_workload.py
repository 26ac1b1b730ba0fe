"""`reame bench --cluster`'s multi-user chat workload and its arithmetic, without servers: several
system prompts, many conversations behind them, several turns each; what each answer cost, the
token-weighted prefix hit ratio, percentiles, the spread over replicas and a replica's warm-up."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from reame_bench.workloads import filler_text, topics


@dataclass(frozen=True, slots=True)
class Conversation:
    system: str
    questions: tuple[str, ...]  # one a turn


@dataclass(frozen=True, slots=True)
class Answer:
    conversation: int
    turn: int  # from 1
    replica: str  # who answered (HAProxy names it)
    started: float  # seconds since the run began
    ttft: float
    prompt_tokens: int
    cached_tokens: int


def chat_workload(
    num_systems: int, num_conversations: int, turns: int, system_words: int, seed: int = 0
) -> list[Conversation]:
    """Conversation k sits behind system prompt k % num_systems; every question differs."""
    systems = [
        f"You are assistant {i + 1}. Answer in one short sentence. "
        + filler_text(seed=seed * 1000 + 7000 + i, num_words=system_words)
        for i in range(num_systems)
    ]
    subjects = topics(num_conversations * turns)

    def question(n: int) -> str:
        return f"{subjects[n]} ({filler_text(seed=seed * 1000 + n, num_words=3)})"

    return [
        Conversation(systems[k % num_systems], tuple(question(k * turns + t) for t in range(turns)))
        for k in range(num_conversations)
    ]


def lanes(num_conversations: int, users: int) -> list[list[int]]:
    """Which conversations each user holds, one after another."""
    return [list(range(u, num_conversations, users)) for u in range(users)]


def hit_ratio(answers: Sequence[Answer]) -> float:
    """Prompt tokens restored over prompt tokens sent, over every answer."""
    sent = sum(a.prompt_tokens for a in answers)
    return sum(a.cached_tokens for a in answers) / sent if sent else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile, linear between the closest ranks (the median for q = 50)."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


def spread(answers: Sequence[Answer]) -> dict[str, int]:
    """Answers per replica."""
    return dict(sorted(Counter(a.replica for a in answers).items()))


def moved_conversations(answers: Sequence[Answer]) -> int:
    """Conversations whose turns were not all answered by one replica."""
    where: defaultdict[int, set[str]] = defaultdict(set)
    for a in answers:
        where[a.conversation].add(a.replica)
    return sum(1 for replicas in where.values() if len(replicas) > 1)


@dataclass(frozen=True, slots=True)
class Window:
    first: int  # the window's first answer, counted from 1
    count: int
    hit_ratio: float
    median_ttft: float


def warm_up(answers: Sequence[Answer], replica: str, since: float, size: int) -> list[Window]:
    """The answers `replica` gave after `since`, in the order they were asked, in windows of
    `size`: how fast a replica that joined empty caught up."""
    mine = sorted((a for a in answers if a.replica == replica and a.started >= since),
                  key=lambda a: a.started)  # fmt: skip
    out = []
    for start in range(0, len(mine), size):
        part = mine[start : start + size]
        out.append(
            Window(start + 1, len(part), hit_ratio(part), statistics.median(a.ttft for a in part))
        )
    return out
