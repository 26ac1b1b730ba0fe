"""`reame bench --again`: the same request sent again, as the work Reame is built for sends it
(the same document's fields extracted again, a retried agent step), against any
OpenAI-compatible servers.

Each target gets N extraction requests over the example exam's document (greedy, a field list
each, up to ANSWER_TOKENS tokens), each sent once and then `runs` times again in a row; once whole
and once streamed (other field lists, so the streamed ones start cold too). Reported per target:
the median time of a first request and of a request sent again, and their ratio; between
targets, the ratio of their times again. Targets run one after another, never interleaved.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reame_bench.exam_runner import EXAM_DIR
from reame_bench.targets import HttpTarget

ANSWER_TOKENS = 160
INSTRUCTION = (
    "Extract these fields from the document below as one JSON object, each field's value as "
    "the document gives it, and a short note on where it is said: {fields}.\n\nDocument:\n"
)
FIELDS = (
    "name, town, opened, architect, floors, rooms, suites",
    "first owner, her father, the year she sold it, the buyer",
    "restaurant, chef, speciality, opening hours",
    "renovations, their years, their architects, their cost",
    "famous guests, the year each stayed, the room",
    "spa, pool, garden, beach, parking",
    "prices, seasons, discounts, deposit",
    "awards, their years, who gave them",
)


@dataclass(slots=True)
class Series:
    """One target's times in one mode: of each first request, and of each sent again."""

    first: list[float] = field(default_factory=list)
    again: list[float] = field(default_factory=list)


def bodies(model: str, count: int, offset: int) -> list[dict[str, Any]]:
    document = (EXAM_DIR / "hotel.txt").read_text()
    out = []
    for i in range(count):
        fields = FIELDS[(offset + i) % len(FIELDS)]
        round_ = (offset + i) // len(FIELDS)  # past the list: the same fields, another wording
        ask = INSTRUCTION.format(fields=fields) + ("" if not round_ else f"(Set {round_}.)\n")
        out.append(
            {
                "model": model,
                "messages": [{"role": "user", "content": ask + document}],
                "temperature": 0,
                "max_tokens": ANSWER_TOKENS,
            }
        )
    return out


async def whole(target: HttpTarget, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    await target.post("/v1/chat/completions", body)
    return time.perf_counter() - started


async def streamed(target: HttpTarget, body: dict[str, Any]) -> float:
    timeline = await target.stream_body({**body, "stream": True})
    return timeline.finished - timeline.submitted


async def run_target(
    target: HttpTarget, count: int, runs: int, progress: Callable[[str], None]
) -> dict[str, Series]:
    out = {"whole": Series(), "streamed": Series()}
    for offset, (mode, send) in enumerate((("whole", whole), ("streamed", streamed))):
        for body in bodies(target.model, count, offset * count):
            series = out[mode]
            series.first.append(await send(target, body))
            for _ in range(runs):
                series.again.append(await send(target, body))
            progress(f"{target.name} {mode}: {len(series.first)}/{count}")
    return out


def report(results: dict[str, dict[str, Series]]) -> str:
    """Per target and mode the medians and their ratio; the first target over each other."""
    lines = [
        "| target | mode | first s | again s | again / first |",
        "|---|---|---|---|---|",
    ]
    for name, modes in results.items():
        for mode, s in modes.items():
            first, again = statistics.median(s.first), statistics.median(s.again)
            lines.append(f"| {name} | {mode} | {first:.3f} | {again:.3f} | {again / first:.3f} |")
    names = list(results)
    for other in names[1:]:
        for mode in results[names[0]]:
            mine = statistics.median(results[names[0]][mode].again)
            theirs = statistics.median(results[other][mode].again)
            lines.append(f"\nagain, {names[0]} over {other} ({mode}): {mine / theirs:.3f}x")
    return "\n".join(lines)


def check(count: int, runs: int) -> Sequence[str]:
    """What is wrong with the flags (nothing: empty)."""
    problems = []
    if count < 1:
        problems.append("--again is how many requests: 1 or more")
    if runs < 1:
        problems.append("--again-runs is 1 or more")
    return problems
