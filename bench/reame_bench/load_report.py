"""`reame bench --load`'s figures from the clients' outcomes, its pass/fail checks, and its
markdown table and JSON."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from reame_bench.load_client import Outcome
from reame_bench.load_mix import EXPECTED, KINDS

FREED_BOUND_S = 5.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0-100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(slots=True)
class KindRow:
    """Latency is over the answers that are not 429 (a 429 is immediate and would hide the
    time real answers take); time to first token over streams answered 200."""

    sent: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    p50_s: float | None = None
    p99_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    dropped: int = 0


@dataclass(slots=True)
class LoadFigures:
    kinds: dict[str, KindRow]
    statuses: dict[str, int]
    sent: int
    num_5xx: int
    num_429: int
    num_429_without_retry_after: int
    connection_errors: int
    hangs: int
    problems: list[str]  # broken streams, bodies that are no answer: kind and what
    unexpected_statuses: list[str]  # kind, status and what it expects
    freed_after_s: float | None = None  # None: not freed within the bound
    answers_after: bool = False  # a plain chat answered 200 once the load was over
    server_5xx: int = 0  # as the server's own /metrics counts them; -1: it stopped answering
    server_errors: list[str] = field(default_factory=list)  # the server log's error lines

    def checks(self) -> dict[str, bool]:
        return {
            "no 5xx (clients' count)": self.num_5xx == 0,
            "no 5xx (server's /metrics)": self.server_5xx == 0,
            "every 429 carried Retry-After": self.num_429_without_retry_after == 0,
            "no connection error the client did not cause": self.connection_errors == 0,
            "no request hung": self.hangs == 0,
            "every stream and answer was whole": not self.problems,
            "every status was one its kind expects": not self.unexpected_statuses,
            f"slots freed within {FREED_BOUND_S:.0f} s of the end": self.freed_after_s is not None,
            "a chat answered after the load": self.answers_after,
        }

    @property
    def ok(self) -> bool:
        return all(self.checks().values())


def _status(o: Outcome) -> str:
    if o.is_hang:
        return "hang"
    return str(o.status) if o.status is not None else "conn-error"


def summarize(outcomes: Sequence[Outcome]) -> LoadFigures:
    kinds = {k: KindRow() for k in KINDS}
    problems: list[str] = []
    unexpected: list[str] = []
    for kind, row in kinds.items():
        mine = [o for o in outcomes if o.kind == kind]
        row.sent = len(mine)
        row.statuses = dict(sorted(Counter(_status(o) for o in mine).items()))
        answered = [o.latency for o in mine if o.status is not None and o.status != 429]
        row.p50_s, row.p99_s = percentile(answered, 50), percentile(answered, 99)
        firsts = [o.ttft for o in mine if o.ttft is not None]
        row.ttft_p50_s, row.ttft_p99_s = percentile(firsts, 50), percentile(firsts, 99)
        row.dropped = sum(o.is_dropped for o in mine)
        for o in mine:
            if o.status is not None and o.status not in EXPECTED[kind]:
                unexpected.append(f"{kind}: HTTP {o.status} (expected {sorted(EXPECTED[kind])})")
            elif o.problem and not (o.is_connection_error or o.is_hang):
                problems.append(f"{kind}: {o.problem}")
    statuses = Counter(_status(o) for o in outcomes)
    return LoadFigures(
        kinds={k: r for k, r in kinds.items() if r.sent},
        statuses=dict(sorted(statuses.items())),
        sent=len(outcomes),
        num_5xx=sum(1 for o in outcomes if o.status is not None and o.status >= 500),
        num_429=statuses.get("429", 0),
        num_429_without_retry_after=sum(
            1 for o in outcomes if o.status == 429 and not o.retry_after
        ),
        connection_errors=sum(o.is_connection_error for o in outcomes),
        hangs=sum(o.is_hang for o in outcomes),
        problems=problems,
        unexpected_statuses=unexpected,
    )


def connection_problems(outcomes: Sequence[Outcome]) -> list[str]:
    return [f"{o.kind}: {o.problem}" for o in outcomes if o.is_connection_error or o.is_hang]


def as_dict(header: dict[str, Any], figures: LoadFigures) -> dict[str, Any]:
    return {**header, **asdict(figures), "checks": figures.checks(), "ok": figures.ok}


def as_json(header: dict[str, Any], figures: LoadFigures) -> str:
    return json.dumps(as_dict(header, figures), indent=2)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def as_table(header: dict[str, Any], figures: LoadFigures, details: Sequence[str] = ()) -> str:
    lines = [f"- {k}: {v}" for k, v in header.items()]
    lines += [
        "",
        "| kind | sent | statuses | p50 s | p99 s | TTFT p50 s | TTFT p99 s | dropped |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for kind, r in figures.kinds.items():
        statuses = " ".join(f"{s}:{n}" for s, n in r.statuses.items())
        lines.append(
            f"| {kind} | {r.sent} | {statuses} | {_s(r.p50_s)} | {_s(r.p99_s)} | "
            f"{_s(r.ttft_p50_s)} | {_s(r.ttft_p99_s)} | {r.dropped} |"
        )
    total = " ".join(f"{s}:{n}" for s, n in figures.statuses.items())
    lines.append(f"| **all** | {figures.sent} | {total} | | | | | |")
    freed = "no" if figures.freed_after_s is None else f"{figures.freed_after_s:.2f} s"
    lines += [
        "",
        "| figure | value |",
        "|---|---:|",
        f"| 5xx (clients / server's /metrics) | {figures.num_5xx} / {figures.server_5xx} |",
        f"| 429 | {figures.num_429} |",
        f"| 429 without Retry-After | {figures.num_429_without_retry_after} |",
        f"| connection errors (not the client's own drops) | {figures.connection_errors} |",
        f"| hung requests | {figures.hangs} |",
        f"| slots freed after the load (running and waiting at 0) | {freed} |",
        "",
        "(latency: request to last byte, over answers other than 429; TTFT: to the first "
        "content chunk of streams answered 200; dropped: streams the client closed mid-way)",
        "",
    ]
    lines += [f"{'yes' if ok else 'NO '}  {name}" for name, ok in figures.checks().items()]
    shown = [
        *figures.unexpected_statuses[:10],
        *figures.problems[:10],
        *details[:10],
        *figures.server_errors[:10],
    ]
    if shown:
        lines += ["", "what went wrong (first of each):", *(f"  {line}" for line in shown)]
    return "\n".join(lines)
