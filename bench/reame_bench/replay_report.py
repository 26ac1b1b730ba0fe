"""`reame bench --replay`'s figures from its per-request records, without servers: the median
time a request of the first and the last requests and their ratio (does a server get faster as
a trace goes on?), the same across a restart, time to first token of later turns, the speed-up
against the share of passages a question shares with the one before; a Markdown table a trace
and the JSON the plots and docs read."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from reame_bench.replay_traces import OVERLAPS


@dataclass(frozen=True, slots=True)
class Mode:
    """How a trace is sent: by one client or several users at once, and whether the servers
    are restarted after request `restart_after`."""

    users: int
    restart_after: int | None = None

    @property
    def key(self) -> str:
        who = "one-client" if self.users == 1 else f"{self.users}-users"
        return who + ("-restart" if self.restart_after else "")

    @property
    def label(self) -> str:
        who = "one client" if self.users == 1 else f"{self.users} users at once"
        return who + (
            f", restarted after request {self.restart_after}" if self.restart_after else ""
        )


def modes(num_requests: int, users: int) -> list[Mode]:
    """Straight through and restarted half-way, by one client, then by `users` (if more)."""
    half = num_requests // 2
    out = [Mode(1), Mode(1, half)]
    return out + ([Mode(users), Mode(users, half)] if users > 1 else [])


@dataclass(frozen=True, slots=True)
class Record:
    """One request as the client saw it; times in seconds. `accepted_drafts`: drafted tokens
    kept in the answer, None when the server does not say."""

    trace: str
    server: str
    mode: str  # Mode.key
    index: int
    conversation: int
    turn: int
    user: int
    started: float  # since the run began
    ttft: float
    total: float
    decode_tps: float | None
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    accepted_drafts: int | None
    overlap: float | None
    after_restart: bool
    error: str = ""
    answer: str = ""  # its text, and its tool calls as name(arguments)
    tool_calls: int = 0  # whole calls (a name and JSON object arguments) in the answer

    @property
    def drafted_share(self) -> float | None:
        if self.accepted_drafts is None or not self.completion_tokens:
            return None
        return self.accepted_drafts / self.completion_tokens


def window_size(num_requests: int) -> int:
    """10 requests at each end of 100; at most a quarter of a short trace, so the first and
    last windows (and those either side of the restart) never overlap."""
    return min(10, max(1, num_requests // 4))


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _ok(records: Sequence[Record]) -> list[Record]:
    return [r for r in records if not r.error]


def median_of(
    records: Sequence[Record],
    first: int,
    last: int,
    get: Callable[[Record], float] = lambda r: r.total,
) -> float | None:
    """The median of `get` over requests first..last (by index, counted from 1)."""
    return median([get(r) for r in _ok(records) if first <= r.index <= last])


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


@dataclass(frozen=True, slots=True)
class Window:
    first: int
    last: int

    @property
    def label(self) -> str:
        return (
            f"requests {self.first}-{self.last}"
            if self.last > self.first
            else f"request {self.first}"
        )


def windows(num_requests: int, restart_after: int | None) -> dict[str, Window]:
    """The first and last windows, and with a restart those just before and just after it."""
    w = window_size(num_requests)
    out = {"first": Window(1, w), "last": Window(num_requests - w + 1, num_requests)}
    if restart_after:
        out["before"] = Window(restart_after - w + 1, restart_after)
        out["after"] = Window(restart_after + 1, min(restart_after + w, num_requests))
    return out


def run_figures(
    records: Sequence[Record], num_requests: int, restart_after: int | None
) -> dict[str, float | None]:
    """One run's figures (one trace, server and mode): median time a request of each window,
    the last over the first (the hundredth request's figure), after the restart over before;
    median time to first token of first and later turns."""
    spans = windows(num_requests, restart_after)
    out: dict[str, float | None] = {
        name: median_of(records, w.first, w.last) for name, w in spans.items()
    }
    out["last_over_first"] = ratio(out["last"], out["first"])
    if restart_after:
        out["after_over_before"] = ratio(out["after"], out["before"])
    ok = _ok(records)
    out["ttft_first_turns"] = median([r.ttft for r in ok if r.turn == 1])
    out["ttft_later_turns"] = median([r.ttft for r in ok if r.turn > 1])
    out["ttft_all"] = median([r.ttft for r in ok])
    out["decode_tps"] = median([r.decode_tps for r in ok if r.decode_tps is not None])
    out["prompt_tokens"] = median([float(r.prompt_tokens) for r in ok])
    out["completion_tokens"] = median([float(r.completion_tokens) for r in ok])
    # NOTE: a tool call's first chunk carries its whole name, some tokens after its first token:
    # where one server calls tools and the other answers in text, their times to first token
    # measure different things
    out["tool_call_share"] = sum(1 for r in ok if r.tool_calls) / len(ok) if ok else None
    sent = sum(r.prompt_tokens for r in ok)
    out["cached_share"] = sum(r.cached_tokens for r in ok) / sent if sent else None
    out["computed_tokens"] = float(sent - sum(r.cached_tokens for r in ok))
    drafted = [r for r in ok if r.accepted_drafts is not None]
    made = sum(r.completion_tokens for r in drafted)
    out["drafted_share"] = sum(r.accepted_drafts or 0 for r in drafted) / made if made else None
    out["errors"] = float(len(records) - len(ok))
    return out


def overlap_figures(records: Sequence[Record]) -> dict[float, dict[str, float | None]]:
    """For each overlap level of the rag trace: requests, median time to first token, and the
    speed-up over the questions that share nothing (their median time to first token over
    this level's)."""
    ok = _ok(records)
    cold = median([r.ttft for r in ok if r.overlap == 0.0])
    out = {}
    for level in OVERLAPS:
        ttft = median([r.ttft for r in ok if r.overlap == level])
        count = float(sum(1 for r in ok if r.overlap == level))
        out[level] = {"requests": count, "ttft": ttft, "speedup": ratio(cold, ttft)}
    return out


def _group(records: Sequence[Record]) -> dict[tuple[str, str, str], list[Record]]:
    out: dict[tuple[str, str, str], list[Record]] = {}
    for r in records:
        out.setdefault((r.trace, r.server, r.mode), []).append(r)
    return out


def figures(
    records: Sequence[Record], num_requests: int, run_modes: Sequence[Mode]
) -> dict[str, Any]:
    """{trace: {server: {mode key: run figures}}}, plus {"rag_overlap": {server: levels}} from
    the rag trace's one-client run."""
    by_mode = {m.key: m for m in run_modes}
    out: dict[str, Any] = {}
    for (trace, server, key), run in _group(records).items():
        mode = by_mode[key]
        out.setdefault(trace, {}).setdefault(server, {})[key] = run_figures(
            run, num_requests, mode.restart_after
        )
        if trace == "rag" and key == Mode(1).key:
            out.setdefault("rag_overlap", {})[server] = overlap_figures(run)
    return out


def _s(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.3f} s"


def _x(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.2f}x"


def _count(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def trace_table(
    figs: dict[str, dict[str, dict[str, float | None]]],
    servers: Sequence[str],
    run_modes: Sequence[Mode],
    num_requests: int,
    multi_turn: bool,
) -> str:
    """Reame (the first server) and the peer side by side; the last column Reame's figure over
    the peer's, for times."""
    pair = len(servers) == 2
    headers = ["", *servers, *([f"{servers[0]} over {servers[1]}"] if pair else [])]
    rows: list[list[str]] = []

    def row(label: str, key: str, mode: Mode, fmt: Callable[[float | None], str]) -> None:
        values = [figs.get(s, {}).get(mode.key, {}).get(key) for s in servers]
        if all(v is None for v in values):
            return
        cells = [fmt(v) for v in values]
        if pair:
            cells.append(_x(ratio(values[0], values[1])) if fmt is _s else "")
        rows.append([label, *cells])

    for mode in run_modes:
        if not any(mode.key in figs.get(s, {}) for s in servers):
            continue
        rows.append([f"**{mode.label}**", *[""] * (len(headers) - 1)])
        spans = windows(num_requests, mode.restart_after)
        order = ("first", "before", "after", "last") if mode.restart_after else ("first", "last")
        for name in order:
            suffix = {"before": " (before the restart)", "after": " (after it)"}.get(name, "")
            row(f"median time a request, {spans[name].label}{suffix}", name, mode, _s)
        row(f"{spans['last'].label} over {spans['first'].label}", "last_over_first", mode, _x)
        if mode.restart_after:
            label = f"{spans['after'].label} over {spans['before'].label}"
            row(label, "after_over_before", mode, _x)
        if multi_turn:
            row("time to first token, later turns (median)", "ttft_later_turns", mode, _s)
    first = run_modes[0]
    rows.append([f"**every request, {first.label}**", *[""] * (len(headers) - 1)])
    # NOTE: a trace of single questions (extract, rag) counts each as a first turn: its figure
    # is every request's
    if multi_turn:
        row("time to first token, first turns", "ttft_first_turns", first, _s)
    else:
        row("time to first token", "ttft_all", first, _s)
    if multi_turn:
        row("time to first token, every request", "ttft_all", first, _s)
    row("decode tok/s (median)", "decode_tps", first, lambda v: "-" if v is None else f"{v:.1f}")
    row("prompt tokens (median)", "prompt_tokens", first, _count)
    row("completion tokens (median)", "completion_tokens", first, _count)
    if any(figs.get(s, {}).get(first.key, {}).get("tool_call_share") for s in servers):
        row("answers that called a tool", "tool_call_share", first, _share)
    row("cached share of prompt tokens", "cached_share", first, _share)
    row("prompt tokens computed (all requests)", "computed_tokens", first, _count)
    row("drafted share of completion tokens", "drafted_share", first, _share)
    for mode in run_modes:
        row(f"failed requests, {mode.label}", "errors", mode, _count)
    return grid(headers, rows)


def overlap_table(
    levels: dict[str, dict[float, dict[str, float | None]]], servers: Sequence[str]
) -> str:
    here = [s for s in servers if s in levels]
    pair = len(here) == 2
    headers = ["passages shared with the question before", "requests"]
    headers += [f"{s}: time to first token" for s in here] + [f"{s}: speed-up" for s in here]
    headers += [f"{here[0]} over {here[1]}"] if pair else []
    rows = []
    for level in OVERLAPS:
        figs = [levels[s][level] for s in here]
        cells = [f"{100 * level:.0f}%", f"{figs[0]['requests']:.0f}"]
        cells += [_s(f["ttft"]) for f in figs] + [_x(f["speedup"]) for f in figs]
        if pair:
            cells.append(_x(ratio(figs[0]["ttft"], figs[1]["ttft"])))
        rows.append(cells)
    return grid(headers, rows)


def markdown(
    header: dict[str, Any],
    summaries: dict[str, str],
    figs: dict[str, Any],
    servers: Sequence[str],
    run_modes: Sequence[Mode],
    num_requests: int,
    plots: dict[str, str],
    notes: Sequence[str] = (),
) -> str:
    """report.md: the settings, then a section a trace with its table and plots."""
    out = ["# reame bench --replay", ""]
    out += [f"- {k}: {v}" for k, v in header.items()]
    out += [f"- note: {n}" for n in notes]
    for trace, summary in summaries.items():
        out += ["", f"## {trace}", "", summary + ".", ""]
        multi_turn = trace in ("chat", "agent")
        out.append(trace_table(figs.get(trace, {}), servers, run_modes, num_requests, multi_turn))
        if trace == "rag" and figs.get("rag_overlap"):
            out += ["", "Speed-up against overlap (one client, straight through; time to first "
                    "token at 0% over that at each level):", ""]  # fmt: skip
            out.append(overlap_table(figs["rag_overlap"], servers))
        out += [""] + [
            f"![{name}]({file})" for name, file in plots.items() if name.startswith(trace)
        ]
    return "\n".join(out) + "\n"


def as_json(
    header: dict[str, Any],
    summaries: dict[str, str],
    figs: dict[str, Any],
    records: Sequence[Record],
) -> str:
    def keys(value: Any) -> Any:  # NOTE: JSON keys are strings (the overlap levels are floats)
        if isinstance(value, dict):
            return {str(k): keys(v) for k, v in value.items()}
        return value

    def plain(record: Record) -> dict[str, Any]:  # NOTE: a failed request's times: null
        return {k: None if isinstance(v, float) and math.isnan(v) else v
                for k, v in asdict(record).items()}  # fmt: skip

    data = {"header": header, "traces": summaries, "figures": keys(figs),
            "records": [plain(r) for r in records]}  # fmt: skip
    return json.dumps(data, indent=1)
