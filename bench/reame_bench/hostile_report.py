"""`reame bench --hostile`'s figures: the victim's latency and /health per phase, the server's
RSS, what each attack met and what the server counted; the hard checks (the exit code) and the
bars (timings, reported: the machine's, never a test's), as a markdown table or JSON."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reame_bench.hostile_plan import EXPECTED
from reame_bench.hostile_watch import HEALTH_TIMEOUT_S, Phase
from reame_bench.load_report import FREED_BOUND_S, percentile

RATIO_BAR = 1.5  # the victim's median latency, hostile over quiet
HEALTH_P99_BAR_S = 1.0
RSS_GROWTH_BAR = 0.10  # beyond the budgeted stores, hostile's peak over quiet's
_LABELS = re.compile(r'route="([^"]*)",status="([^"]*)"')


@dataclass(slots=True)
class ServerCounts:
    """What the server counted over a phase, from its /metrics."""

    statuses: dict[str, int]  # "route status": answers
    num_5xx: int
    cut_off: int  # reame_cut_off_clients_total
    refused_connections: int  # reame_refused_connections_total


def server_counts(before: Mapping[str, float], after: Mapping[str, float]) -> ServerCounts:
    def delta(name: str) -> int:
        return int(after.get(name, 0) - before.get(name, 0))

    statuses: dict[str, int] = {}
    for name in after:
        if name.startswith("reame_requests_total{") and (n := delta(name)):
            labels = _LABELS.search(name)
            statuses[f"{labels[1]} {labels[2]}" if labels else name] = n
    return ServerCounts(
        dict(sorted(statuses.items())),
        sum(n for k, n in statuses.items() if k.rsplit(" ", 1)[-1].startswith("5")),
        delta("reame_cut_off_clients_total"),
        delta("reame_refused_connections_total"),
    )


def quarters(samples: Sequence[float]) -> list[float]:
    """The highest sample of each quarter of a phase, in order: whether RSS levels off."""
    n = len(samples)
    cuts = [round(n * k / 4) for k in range(5)]
    return [round(max(samples[a:b]), 1) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def phase_summary(phase: Phase) -> dict[str, Any]:
    peak = max(phase.rss_mb, default=0.0)
    return {
        "seconds": round(phase.seconds, 1),
        "victim_answers": len(phase.victim_s),
        "victim_statuses": dict(sorted(phase.victim_statuses.items())),
        "victim_p50_s": _r(percentile(phase.victim_s, 50)),
        "victim_median_s": _r(statistics.median(phase.victim_s) if phase.victim_s else None),
        "victim_p90_s": _r(percentile(phase.victim_s, 90)),
        "victim_p99_s": _r(percentile(phase.victim_s, 99)),
        "health_polls": len(phase.health_s),
        "health_failures": dict(phase.health_failures),
        "health_p50_s": _r(percentile(phase.health_s, 50)),
        "health_p99_s": _r(percentile(phase.health_s, 99)),
        "health_max_s": _r(max(phase.health_s, default=None)),
        "rss_first_mb": round(phase.rss_mb[0], 1) if phase.rss_mb else None,
        "rss_peak_mb": round(peak, 1),
        "rss_last_mb": round(phase.rss_mb[-1], 1) if phase.rss_mb else None,
        "rss_quarters_mb": quarters(phase.rss_mb),
        "stores_mb": round(phase.stores_mb, 1),
        "rss_peak_beyond_stores_mb": round(peak - phase.stores_mb, 1),
        "cpu_cores": phase.cpu_cores,
        "victim_problems": phase.victim_problems[:10],
    }


@dataclass(slots=True)
class HostileFigures:
    quiet: Phase
    hostile: Phase
    attack: dict[str, Any]  # the attacker's report: outcomes per attack, peak sockets, errors
    server_quiet: ServerCounts
    server_hostile: ServerCounts
    freed_after_s: float | None
    answers_after: bool
    rss_after_mb: float
    server_5xx_total: int = 0  # over the whole run, the warm-up included
    server_exit_code: int | None = None
    server_errors: list[str] = field(default_factory=list)

    def outcomes(self) -> dict[str, dict[str, int]]:
        return {name: s["outcomes"] for name, s in self.attack.get("attacks", {}).items()}

    def unexpected(self) -> list[str]:
        return [
            f"{name}: {outcome} x{n} (expected {', '.join(sorted(EXPECTED[name]))})"
            for name, counts in self.outcomes().items()
            for outcome, n in counts.items()
            if outcome not in EXPECTED[name]
        ]

    def client_5xx(self) -> int:
        seen = [*self.quiet.victim_statuses.items(), *self.hostile.victim_statuses.items()]
        seen += [kv for counts in self.outcomes().values() for kv in counts.items()]
        return sum(n for status, n in seen if status.startswith("5"))

    def ratio(self) -> float | None:
        quiet, hostile = self.quiet.victim_s, self.hostile.victim_s
        if not quiet or not hostile:
            return None
        return statistics.median(hostile) / statistics.median(quiet)

    def rss_growth(self) -> tuple[float, float]:
        """The hostile phase's peak RSS beyond the budgeted stores over the quiet one's: MB
        and as a share of the quiet one's."""
        quiet = max(self.quiet.rss_mb, default=0.0) - self.quiet.stores_mb
        hostile = max(self.hostile.rss_mb, default=0.0) - self.hostile.stores_mb
        return hostile - quiet, (hostile - quiet) / quiet if quiet > 0 else 0.0

    def checks(self) -> dict[str, bool]:
        """What must hold whatever the machine's speed."""
        phases = (self.quiet, self.hostile)
        return {
            "no 5xx (clients' count)": self.client_5xx() == 0,
            "no 5xx (server's /metrics, whole run)": self.server_5xx_total == 0,
            "every attacker outcome is one its attack expects": not self.unexpected(),
            "every attack ran": all(sum(c.values()) for c in self.outcomes().values()),
            "the victim's every request answered 200, whole": all(
                set(p.victim_statuses) == {"200"} and not p.victim_problems for p in phases
            ),
            f"/health answered 200 within {HEALTH_TIMEOUT_S:.0f} s at every poll": all(
                p.health_s and not p.health_failures for p in phases
            ),
            f"slots freed within {FREED_BOUND_S:.0f} s of the end": self.freed_after_s is not None,
            "a chat answered after the attack": self.answers_after,
            "the attacker's own code raised nothing": not self.attack.get("errors"),
            "the server exited 0": self.server_exit_code == 0,
        }

    @property
    def ok(self) -> bool:
        return all(self.checks().values())

    def bars(self) -> dict[str, tuple[str, bool | None]]:
        """Issue 35's bars: each figure and whether it is met (None: no figure)."""
        ratio = self.ratio()
        growth_mb, growth = self.rss_growth()
        out: dict[str, tuple[str, bool | None]] = {
            f"victim median latency, hostile / quiet <= {RATIO_BAR}": (
                "-" if ratio is None else f"{ratio:.2f}",
                None if ratio is None else ratio <= RATIO_BAR,
            )
        }
        for p in (self.quiet, self.hostile):
            p99 = percentile(p.health_s, 99)
            out[f"/health p99 < {HEALTH_P99_BAR_S:.0f} s, {p.name}"] = (
                "-" if p99 is None else f"{p99:.3f} s",
                None if p99 is None else p99 < HEALTH_P99_BAR_S,
            )
        n5xx = max(self.client_5xx(), self.server_5xx_total)
        out["5xx = 0"] = (str(n5xx), n5xx == 0)
        rss_bar = (
            f"RSS beyond the budgeted stores: hostile peak within {RSS_GROWTH_BAR:.0%} of quiet"
        )
        out[rss_bar] = (
            f"{growth_mb:+.1f} MB ({growth:+.1%})",
            growth <= RSS_GROWTH_BAR,
        )
        return out


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def as_dict(header: dict[str, Any], f: HostileFigures) -> dict[str, Any]:
    return {
        **header,
        "quiet": phase_summary(f.quiet),
        "hostile": phase_summary(f.hostile),
        "victim_ratio": _r(f.ratio()),
        "attack": f.attack,
        "server_quiet": vars_of(f.server_quiet),
        "server_hostile": vars_of(f.server_hostile),
        "server_5xx": f.server_5xx_total,
        "freed_after_s": f.freed_after_s,
        "answers_after": f.answers_after,
        "rss_after_mb": round(f.rss_after_mb, 1),
        "server_exit_code": f.server_exit_code,
        "server_errors": f.server_errors[:20],
        "unexpected": f.unexpected(),
        "bars": {k: {"value": v, "met": met} for k, (v, met) in f.bars().items()},
        "checks": f.checks(),
        "ok": f.ok,
    }


def vars_of(counts: ServerCounts) -> dict[str, Any]:
    return {k: getattr(counts, k) for k in ServerCounts.__slots__}


def as_json(header: dict[str, Any], figures: HostileFigures) -> str:
    return json.dumps(as_dict(header, figures), indent=2)


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _counts(counts: Mapping[str, int]) -> str:
    return " ".join(f"{k}:{n}" for k, n in sorted(counts.items())) or "-"


def as_table(header: dict[str, Any], f: HostileFigures) -> str:
    lines = [f"- {k}: {v}" for k, v in header.items()]
    q, h = phase_summary(f.quiet), phase_summary(f.hostile)
    lines += ["", "| figure | quiet | hostile |", "|---|---:|---:|"]
    rows: Sequence[tuple[str, str]] = (
        ("victim answers", "victim_answers"),
        ("victim p50 s", "victim_p50_s"),
        ("victim p90 s", "victim_p90_s"),
        ("victim p99 s", "victim_p99_s"),
        ("/health polls", "health_polls"),
        ("/health p50 s", "health_p50_s"),
        ("/health p99 s", "health_p99_s"),
        ("/health max s", "health_max_s"),
        ("RSS first MB", "rss_first_mb"),
        ("RSS peak MB", "rss_peak_mb"),
        ("RSS at the end MB", "rss_last_mb"),
        ("of it, budgeted stores MB", "stores_mb"),
    )
    for label, key in rows:
        lines.append(f"| {label} | {q[key]} | {h[key]} |")
    lines.append(
        f"| RSS peak by quarter of the phase MB | {' / '.join(map(str, q['rss_quarters_mb']))} "
        f"| {' / '.join(map(str, h['rss_quarters_mb']))} |"
    )
    for label, key in (
        ("victim statuses", "victim_statuses"),
        ("/health failures", "health_failures"),
    ):
        lines.append(f"| {label} | {_counts(q[key])} | {_counts(h[key])} |")
    for who in q["cpu_cores"]:
        lines.append(
            f"| CPU cores used: {who} | {q['cpu_cores'][who]} | {h['cpu_cores'].get(who, '-')} |"
        )
    sq, sh = f.server_quiet, f.server_hostile
    lines += [
        f"| server: 5xx | {sq.num_5xx} | {sh.num_5xx} |",
        f"| server: streams cut off | {sq.cut_off} | {sh.cut_off} |",
        f"| server: connections refused | {sq.refused_connections} | {sh.refused_connections} |",
        "",
        "| attack | outcomes | median seconds (held, or to the outcome) |",
        "|---|---|---|",
    ]
    for name, s in f.attack.get("attacks", {}).items():
        medians = " ".join(f"{k}:{v}" for k, v in s.get("median_s", {}).items()) or "-"
        lines.append(f"| {name} | {_counts(s['outcomes'])} | {medians} |")
    lines += [
        "",
        "server's answers in the hostile phase, by route and status: " + _counts(sh.statuses),
    ]
    lines += [f"attacker's sockets open at once, at most: {f.attack.get('peak_sockets')}"]
    lines += ["", "| bar | figure | met |", "|---|---:|---|"]
    for name, (value, met) in f.bars().items():
        lines.append(f"| {name} | {value} | {'-' if met is None else 'yes' if met else 'NO'} |")
    lines.append("")
    lines += [f"{'yes' if ok else 'NO '}  {name}" for name, ok in f.checks().items()]
    shown = [
        *f.unexpected()[:10],
        *f.quiet.victim_problems[:5],
        *f.hostile.victim_problems[:5],
        *f.attack.get("errors", [])[:5],
        *f.server_errors[:10],
    ]
    if shown:
        lines += ["", "what went wrong (first of each):", *(f"  {line}" for line in shown)]
    return "\n".join(lines)
