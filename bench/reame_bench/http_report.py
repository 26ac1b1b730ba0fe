"""`reame bench --url`'s table and JSON: one column per target, then one ratio column per target
after the first."""

from __future__ import annotations

import json
from typing import Any

from reame_bench.cells import cell
from reame_bench.http_runner import SCALING, HttpFigures

SAME_SETUP = (
    "every target should serve the same model file with the same threads and parallel slots; "
    "otherwise the ratios compare set-ups, not servers"
)
FOOTNOTE = (
    "(medians of the runs; ratio = median of per-run target/{base} pairs, so for time to first "
    "token a ratio below 1 is better; x1 is the single-stream decode rate; prompts are sized in "
    "words, about one token each, and prefill tok/s counts the prompt tokens the server reports)"
)


def as_dict(header: dict[str, Any], figures: HttpFigures) -> dict[str, Any]:
    return {
        "targets": figures.targets,
        "baseline": figures.baseline,
        "note": SAME_SETUP,
        **header,
        "figures": figures.rows,
        "ratios": figures.ratios,
        "checks": figures.checks,
    }


def as_json(header: dict[str, Any], figures: HttpFigures) -> str:
    return json.dumps(as_dict(header, figures), indent=2)


def _row(label: str, first: int, cells: list[str], widths: list[int]) -> str:
    return label.ljust(first) + "".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


def as_table(header: dict[str, Any], figures: HttpFigures) -> str:
    base = figures.baseline
    lines = [
        f"targets: {', '.join(figures.targets)} (ratios against {base})",
        f"NOTE: {SAME_SETUP}",
        *(f"{k}: {v}" for k, v in header.items()),
        "",
    ]
    titles = [*figures.targets, *(f"{n}/{base}" for n in figures.targets[1:])]
    widths = [max(len(t), 8) + 2 for t in titles]
    first = max(len(m) for m in [*figures.rows, "metric"]) + 2
    lines.append(_row("metric", first, titles, widths))
    for metric, row in figures.rows.items():
        cells = [cell(row.get(n), is_ratio=metric == SCALING) for n in figures.targets]
        ratios = figures.ratios.get(metric, {})
        cells += [cell(ratios.get(n), is_ratio=True) for n in figures.targets[1:]]
        lines.append(_row(metric, first, cells, widths))
    lines.append("")
    for name, ok in figures.checks.items():
        lines.append(f"{'yes' if ok else 'NO '}  {name}")
    lines.append(FOOTNOTE.format(base=base))
    return "\n".join(lines)
