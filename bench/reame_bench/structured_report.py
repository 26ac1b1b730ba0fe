"""`reame bench --structured`'s figures, table and JSON: per workload, one column per target and
one ratio column per target after the first; the Reame-only figures come from the deltas of
its /metrics over the workload and read "-" for a server that does not expose them."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reame_bench.cells import cell
from reame_bench.http_runner import aggregate_tps
from reame_bench.sse_reader import BenchTargetError
from reame_bench.structured_grade import Answer, Grade
from reame_bench.structured_workload import TOOLS

REQUESTS = "requests"
FAILED = "failed requests (HTTP error)"
VALID = "schema-valid answers"
INVALID = "invalid answers"
LENGTH = "ran to max_tokens"
TOOL_OK = "valid tool calls"
ACCURACY = "as expected (share of valid)"
SAME = "same answer as {base}"
WALL = "wall s a request"
DECODE = "decode tok/s"
TOKENS = "completion tokens"
PER_STEP = "tokens a step"
FORCED = "forced share"
MASK = "mask / step"
GRAMMAR = "requests under a grammar"
# per-request figures: their ratios are medians of per-request target/first pairs
PAIRED = (WALL, DECODE, TOKENS)
RATIOED = (*PAIRED, PER_STEP)

GENERATED = "reame_generated_tokens_total"
STEPS = "reame_engine_step_seconds_count"
STEP_SECONDS = "reame_engine_step_seconds_sum"
FORCED_TOKENS = "reame_grammar_forced_tokens_total"
MASKS = "reame_grammar_mask_seconds_count"
MASK_SECONDS = "reame_grammar_mask_seconds_sum"
GRAMMAR_REQUESTS = "reame_grammar_requests_total{"

FOOTNOTE = (
    "(one request at a time, the targets taking turns; medians over the requests; ratio = "
    "median of per-request target/{base} pairs for wall, decode and tokens, value/{base} for "
    "tokens a step, so for wall a ratio below 1 is better; decode tok/s = (completion tokens "
    "- 1) / (last chunk - first chunk); a step is one llama_decode, prefill included; forced "
    "share = forced / generated tokens; mask / step = mean mask time / mean step time; "
    "as expected: the share of the expected fields found, or the expected tool and arguments)"
)

Value = float | int | None


@dataclass(slots=True)
class Result:
    """One target's answers to one workload, in item order, with their grades and the delta
    of its /metrics over the workload (None when it has none)."""

    answers: list[Answer]
    grades: list[Grade]
    metrics: dict[str, float] | None = None
    errors: list[str] = field(default_factory=list)  # per request: its HTTP error, or ""

    def __post_init__(self) -> None:
        if not self.errors:
            self.errors = [""] * len(self.answers)


@dataclass(slots=True)
class StructuredFigures:
    targets: list[str]
    rows: dict[str, dict[str, dict[str, Value]]] = field(default_factory=dict)  # workload ->
    ratios: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    problems: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # workload, target

    @property
    def baseline(self) -> str:
        return self.targets[0]


def metrics_delta(
    before: Mapping[str, float] | None, after: Mapping[str, float] | None
) -> dict[str, float] | None:
    """How much each series grew; a series first seen after (a new label) grew from 0."""
    if before is None or after is None:
        return None
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def _share(top: float | None, bottom: float | None) -> float | None:
    if top is None or not bottom:
        return None
    return top / bottom


def metric_figures(delta: Mapping[str, float] | None) -> dict[str, Value]:
    """Tokens a step, forced share, mask cost a token as a share of a step, grammar requests;
    None for each the server does not expose."""
    d = delta or {}
    mean_mask = _share(d.get(MASK_SECONDS), d.get(MASKS))
    mean_step = _share(d.get(STEP_SECONDS), d.get(STEPS))
    grammar = [v for k, v in d.items() if k.startswith(GRAMMAR_REQUESTS)]
    return {
        PER_STEP: _share(d.get(GENERATED), d.get(STEPS)),
        FORCED: _share(d.get(FORCED_TOKENS), d.get(GENERATED)),
        MASK: _share(mean_mask, mean_step),
        GRAMMAR: round(sum(grammar)) if grammar else None,
    }


def decode_tps(answer: Answer) -> float | None:
    """The single-stream decode rate, None when the answer came in one chunk."""
    try:
        return aggregate_tps([answer.timeline])
    except BenchTargetError:
        return None


def per_request(result: Result) -> dict[str, list[float | None]]:
    """Wall, decode and tokens per request; None for a failed one (or no decode rate)."""
    out: dict[str, list[float | None]] = {m: [] for m in PAIRED}
    for answer, error in zip(result.answers, result.errors, strict=True):
        t = answer.timeline
        ok = not error
        out[WALL].append(t.finished - t.submitted if ok else None)
        out[DECODE].append(decode_tps(answer) if ok else None)
        out[TOKENS].append(float(t.num_tokens) if ok else None)
    return out


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _paired_ratio(values: Sequence[float | None], base: Sequence[float | None]) -> float | None:
    pairs = [v / b for v, b in zip(values, base, strict=True) if v is not None and b]
    return statistics.median(pairs) if pairs else None


def _counts(workload: str, result: Result, base: Result) -> dict[str, Value]:
    # NOTE: a request the server refused has no answer to judge
    grades = [g for g, e in zip(result.grades, result.errors, strict=True) if not e]
    valid = [g for g in grades if g.is_valid]
    accuracy = [g.accuracy for g in valid if g.accuracy is not None]
    same = sum(
        not e and not be and a.signature == b.signature
        for a, b, e, be in zip(
            result.answers, base.answers, result.errors, base.errors, strict=True
        )
    )
    return {
        REQUESTS: len(result.grades),
        FAILED: sum(bool(e) for e in result.errors),
        VALID: len(valid),
        INVALID: sum(g.is_valid is False for g in grades),
        LENGTH: sum(g.is_length for g in grades),
        TOOL_OK: sum(bool(g.is_tool_call_valid) for g in grades) if workload == TOOLS else None,
        ACCURACY: statistics.fmean(accuracy) if accuracy else None,
        SAME: same,
    }


def summarize(
    results: Mapping[str, Mapping[str, Result]], targets: Sequence[str]
) -> StructuredFigures:
    """`results`: workload -> target -> Result, every target's answers to the same items."""
    figures = StructuredFigures(list(targets))
    base = targets[0]
    for workload, by_target in results.items():
        samples = {n: per_request(by_target[n]) for n in targets}
        rows: dict[str, dict[str, Value]] = {}
        for name in targets:
            result = by_target[name]
            values: dict[str, Value] = _counts(workload, result, by_target[base])
            values.update({m: _median(samples[name][m]) for m in PAIRED})
            values.update(metric_figures(result.metrics))
            for metric, value in values.items():
                rows.setdefault(metric, {})[name] = value
        ratios: dict[str, dict[str, float | None]] = {}
        for metric in RATIOED:
            ratios[metric] = {
                n: _paired_ratio(samples[n][metric], samples[base][metric])
                if metric in PAIRED
                else _share(_float(rows[metric][n]), _float(rows[metric][base]))
                for n in targets[1:]
            }
        figures.rows[workload] = rows
        figures.ratios[workload] = ratios
        figures.problems[workload] = {n: _problems(by_target[n]) for n in targets}
    return figures


def _float(value: Value) -> float | None:
    return None if value is None else float(value)


def _problems(result: Result, keep: int = 3) -> list[str]:
    out = [f"request {i}: {e}" for i, e in enumerate(result.errors) if e]
    out += [
        f"request {i}: {g.problem}"
        for i, g in enumerate(result.grades)
        if g.problem and not result.errors[i]
    ]
    return out[:keep]


def _label(metric: str, base: str) -> str:
    return metric.format(base=base)


def as_dict(header: Mapping[str, Any], figures: StructuredFigures) -> dict[str, Any]:
    base = figures.baseline
    return {
        "targets": figures.targets,
        "baseline": base,
        **header,
        "workloads": {
            w: {
                "figures": {_label(m, base): row for m, row in rows.items()},
                "ratios": figures.ratios[w],
                "problems": figures.problems[w],
            }
            for w, rows in figures.rows.items()
        },
    }


def as_json(header: Mapping[str, Any], figures: StructuredFigures) -> str:
    return json.dumps(as_dict(header, figures), indent=2)


def _cell(value: Value, is_ratio: bool = False) -> str:
    return str(value) if isinstance(value, int) else cell(value, is_ratio)


def as_table(header: Mapping[str, Any], figures: StructuredFigures) -> str:
    base = figures.baseline
    lines = [
        f"targets: {', '.join(figures.targets)} (ratios against {base})",
        *(f"{k}: {v}" for k, v in header.items()),
    ]
    titles = [*figures.targets, *(f"{n}/{base}" for n in figures.targets[1:])]
    widths = [max(len(t), 8) + 2 for t in titles]
    labels = [_label(m, base) for rows in figures.rows.values() for m in rows]
    first = max(len(m) for m in [*labels, "metric"]) + 2
    for workload, rows in figures.rows.items():
        lines += ["", f"== {workload}", _row("metric", first, titles, widths)]
        ratios = figures.ratios[workload]
        for metric, row in rows.items():
            if all(v is None for v in row.values()) and metric == TOOL_OK:
                continue  # not a tools workload
            cells = [_cell(row.get(n)) for n in figures.targets]
            if metric in ratios:
                cells += [_cell(ratios[metric].get(n), is_ratio=True) for n in figures.targets[1:]]
            else:
                cells += [""] * (len(figures.targets) - 1)
            lines.append(_row(_label(metric, base), first, cells, widths))
        for name, problems in figures.problems[workload].items():
            lines += [f"  {name}: {p}" for p in problems]
    lines += ["", FOOTNOTE.format(base=base)]
    return "\n".join(lines)


def _row(label: str, first: int, cells: list[str], widths: list[int]) -> str:
    return label.ljust(first) + "".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))
