"""`reame bench --cluster`'s tables (Markdown, so docs/benchmarks.md takes them as they are) and
JSON. Each figure is the median over runs."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from reame_bench.cluster_projection import Measured, Projected
from reame_bench.cluster_routing import REPLACED, Outcome
from reame_bench.cluster_stages import TIERS, Stage
from reame_bench.cluster_workload import (
    hit_ratio,
    moved_conversations,
    percentile,
    spread,
    warm_up,
)

WARM_UP_WINDOW = 4
TIER_TITLES = {
    "cold": "cold",
    "shared": "shared tier",
    "disk": "own disk",
    "slot": "in its slot",
    "ram": "own RAM",
}


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measured(stages: Sequence[Stage]) -> Measured:
    def m(get: Callable[[Stage], float]) -> float:
        return median([get(s) for s in stages])

    return Measured(
        m(lambda s: s.ttft), round(m(lambda s: s.prompt_tokens)),
        round(m(lambda s: s.cached_tokens)), m(lambda s: s.bytes_moved),
        m(lambda s: s.lookup), m(lambda s: s.fetch), m(lambda s: s.decode),
        m(lambda s: s.restore),
    )  # fmt: skip


def _ms(x: float) -> str:
    return f"{1000 * x:.1f} ms"


def stages_table(stages: dict[str, list[Stage]]) -> str:
    med = {t: measured(stages[t]) for t in TIERS}
    cold = med["cold"].ttft
    found = {t: "/".join(sorted({s.source for s in stages[t]})) for t in TIERS}
    rows = [
        ["lookup found", *(found[t] for t in TIERS)],
        ["time to first token", *(f"{med[t].ttft:.3f} s" for t in TIERS)],
        ["over cold", *(f"{cold / med[t].ttft:.1f}x" for t in TIERS)],
        ["tokens restored / prompt",
         *(f"{med[t].cached_tokens} / {med[t].prompt_tokens}" for t in TIERS)],
        ["bytes moved", *(f"{med[t].bytes_moved / 1e6:.2f} MB" for t in TIERS)],
        ["shared tier listing (1 round trip)", *(_ms(med[t].lookup) for t in TIERS)],
        ["fetch", *(_ms(med[t].fetch) for t in TIERS)],
        ["decode (decompress, check)", *(_ms(med[t].decode) for t in TIERS)],
        ["restore into the context", *(_ms(med[t].restore) for t in TIERS)],
        ["the rest (uncached tail, first step, HTTP)",
         *(_ms(median([s.rest for s in stages[t]])) for t in TIERS)],
    ]  # fmt: skip
    return grid(["", *(TIER_TITLES[t] for t in TIERS)], rows)


def projection_table(projected: dict[str, Projected], label: str, link: str | None) -> str:
    cold = projected["cold"].ttft
    rows = [
        ["time to first token", *(f"{projected[t].ttft:.2f} s" for t in TIERS)],
        ["over cold", *(f"{cold / projected[t].ttft:.1f}x" for t in TIERS)],
        ["bytes moved", *(f"{projected[t].bytes_moved / 1e6:.1f} MB" for t in TIERS)],
        ["fetch (loopback, as measured)", *(_ms(projected[t].fetch) for t in TIERS)],
        ["decode", *(_ms(projected[t].decode) for t in TIERS)],
        ["restore", *(_ms(projected[t].restore) for t in TIERS)],
        ["left to compute", *(f"{projected[t].computed:.2f} s" for t in TIERS)],
    ]
    if link:
        rows.insert(4, [f"fetch over {link}", *(
            _ms(projected[t].fetch_over_link) if projected[t].fetch_over_link is not None else "-"
            for t in TIERS
        )])  # fmt: skip
    return f"PROJECTION for {label} (not measured)\n" + grid(
        ["", *(TIER_TITLES[t] for t in TIERS)], rows
    )


def _runs(outcomes: Sequence[Outcome], get: Callable[[Outcome], float]) -> float:
    return median([get(o) for o in outcomes])


def routing_table(scenarios: dict[str, list[Outcome]]) -> str:
    plain = [o for o in scenarios.values() if o[0].scenario.replace_after is None]
    if not plain:
        return ""
    base = {
        "p50": _runs(plain[0], lambda o: percentile([a.ttft for a in o.answers], 50)),
        "p95": _runs(plain[0], lambda o: percentile([a.ttft for a in o.answers], 95)),
    }
    rows = []
    for outcomes in plain:
        p50 = _runs(outcomes, lambda o: percentile([a.ttft for a in o.answers], 50))
        p95 = _runs(outcomes, lambda o: percentile([a.ttft for a in o.answers], 95))
        last = outcomes[-1]
        rows.append([
            last.scenario.routing,
            "yes" if last.scenario.shared else "no",
            f"{_runs(outcomes, lambda o: hit_ratio(o.answers)):.3f}",
            f"{p50:.3f} s ({p50 / base['p50']:.2f}x)",
            f"{p95:.3f} s ({p95 / base['p95']:.2f}x)",
            " / ".join(f"{k} {v}" for k, v in spread(last.answers).items()),
            f"{_runs(outcomes, lambda o: moved_conversations(o.answers)):.0f}",
            f"{_runs(outcomes, lambda o: o.tier_bytes) / 1e6:.1f} MB"
            if last.scenario.shared else "-",
            f"{_runs(outcomes, lambda o: o.seconds):.0f} s",
            f"{sum(len(o.failures) for o in outcomes)}",
        ])  # fmt: skip
    return grid(
        ["routing", "shared tier", "prefix hit ratio (token-weighted)", "p50 time to first token",
         "p95", "answers per replica (last run)", "conversations that moved", "tier held",
         "wall time", "failed answers"],
        rows,
    )  # fmt: skip


def replacement_table(scenarios: dict[str, list[Outcome]]) -> str:
    replaced = [o for o in scenarios.values() if o[0].scenario.replace_after is not None]
    parts = []
    for outcomes in replaced:
        last = outcomes[-1]
        since = last.replaced_at or 0.0
        windows = warm_up(last.answers, REPLACED, since, WARM_UP_WINDOW)
        before = [a for a in last.answers if a.replica == REPLACED and a.started < since]
        rows = [["before (the replica replaced)", f"{len(before)}",
                 f"{hit_ratio(before):.3f}",
                 f"{median([a.ttft for a in before]):.3f} s"]]  # fmt: skip
        rows += [
            [f"new replica, answers {w.first}-{w.first + w.count - 1}", f"{w.count}",
             f"{w.hit_ratio:.3f}", f"{w.median_ttft:.3f} s"]
            for w in windows
        ]  # fmt: skip
        parts.append(
            f"{last.scenario.name} (last run): the empty replica was ready "
            f"{last.replacement_start_s or 0:.1f} s after it started, {since:.0f} s into the run; "
            f"whole run hit ratio {hit_ratio(last.answers):.3f}; "
            f"{len(last.failures)} answers failed{_first(last.failures)}\n"
            + grid(
                ["answers of r2", "count", "prefix hit ratio", "median time to first token"], rows
            )  # fmt: skip
        )
    return "\n\n".join(parts)


def _first(failures: Sequence[str]) -> str:
    return f" (the first: {failures[0]})" if failures else ""


def as_json(
    header: dict[str, Any],
    stages: dict[str, list[Stage]] | None,
    scenarios: dict[str, list[Outcome]],
    projected: dict[str, Projected] | None,
) -> str:
    return json.dumps({
        **header,
        "stages": {t: [asdict(s) for s in v] for t, v in (stages or {}).items()},
        "projection": {t: asdict(p) for t, p in (projected or {}).items()},
        "scenarios": {
            name: [{**asdict(o), "scenario": asdict(o.scenario)} for o in outcomes]
            for name, outcomes in scenarios.items()
        },
    }, indent=2)  # fmt: skip
