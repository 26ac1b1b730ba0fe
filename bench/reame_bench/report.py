"""The bench's readable table and its JSON."""

from __future__ import annotations

import json
from typing import Any

from reame_bench.cells import cell
from reame_bench.runner import Figures


def as_dict(header: dict[str, Any], figures: Figures) -> dict[str, Any]:
    return {**header, "figures": figures.rows, "checks": figures.checks}


def as_json(header: dict[str, Any], figures: Figures) -> str:
    return json.dumps(as_dict(header, figures), indent=2)


def as_table(header: dict[str, Any], figures: Figures) -> str:
    lines = [f"{k}: {v}" for k, v in header.items()]
    lines.append("")
    width = max(len(k) for k in figures.rows) + 2
    lines.append(f"{'metric':<{width}}{'reame':>10}{'plain loop':>12}{'ratio':>9}")
    for key, row in figures.rows.items():
        reame = cell(row["reame"], is_ratio=key.startswith("x4 over"))
        lines.append(
            f"{key:<{width}}{reame:>10}{cell(row['plain']):>12}"
            f"{cell(row['ratio'], is_ratio=True):>9}"
        )
    lines.append("")
    for name, ok in figures.checks.items():
        lines.append(f"{'yes' if ok else 'NO '}  {name}")
    lines.append(
        "(medians of the runs; ratio = median of per-run reame/plain pairs; for time to "
        "first token a ratio below 1 is better)"
    )
    return "\n".join(lines)
