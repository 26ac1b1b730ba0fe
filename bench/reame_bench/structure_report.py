"""`reame bench --structure`'s report: decode rates and paired ratios a workload row, tokens a
decode step gave, what each drafter drafted and got kept on the Suggeritore-on engine, and what
a verify batch costs here."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from reame_bench.cells import cell
from reame_bench.structure_runner import MODES, OFF, ON, PLAIN, RATIOS, StructureReport, ratio_name

SHORT = {ON: "on", OFF: "off", PLAIN: "no spec"}
LEGEND = (
    "on: speculation auto with Il Suggeritore; off: speculation auto without it; no spec: "
    "speculation off. tok/s: decode, medians of the runs and prompts; a/b: medians of the "
    "pairs of one run and prompt (the structured rows as one: their tokens over their decode "
    "seconds, a run at a time); tok/step: tokens a decode step gave, the speed-up where a "
    "verify batch costs what a 1-token step costs."
)


def as_table(header: dict[str, Any], report: StructureReport) -> str:
    lines = [*(f"{k}: {v}" for k, v in header.items()), f"engines: {report.setup}", ""]
    titles = [
        "tokens",
        *(SHORT[m] for m in MODES),
        *(f"{SHORT[a]}/{SHORT[b]}" for a, b in RATIOS),
        "tok/step on",
        "off",
    ]
    widths = [max(len(t), 6) + 2 for t in titles]
    first = max(len(r) for r in report.tps) + 2
    lines.append(_row("decode tok/s", first, titles, widths))
    for row, by_mode in report.tps.items():
        per_step = report.tokens_per_step[row]
        cells = [
            f"{report.tokens[row]:.0f}",
            *(f"{by_mode[m]:.1f}" for m in MODES),
            *(cell(report.ratios[row][ratio_name(a, b)], is_ratio=True) for a, b in RATIOS),
            f"{per_step[ON]:.2f}",
            f"{per_step[OFF]:.2f}",
        ]
        lines.append(_row(row, first, cells, widths))
    lines += [
        "",
        "drafts on the Suggeritore-on engine (verify runs, drafts verified, kept, kept a run):",
    ]
    for row, by_drafter in report.drafted.items():
        parts = [
            f"{name} {f.runs}, {f.drafted}, {f.accepted}, {f.per_run:.2f}"
            for name, f in sorted(by_drafter.items())
            if f.runs
        ]
        lines.append(f"  {row.ljust(first)}{'; '.join(parts) or '-'}")
    costs = ", ".join(f"{k}: {v:.2f}x" for k, v in report.step_costs.items())
    lines += ["", f"a step of k tokens here, over a 1-token step: {costs or 'not measured'}"]
    lines.append(
        f"{'yes' if report.is_identical else 'NO '}  greedy tokens identical in every mode"
    )
    lines.append(LEGEND)
    return "\n".join(lines)


def _row(label: str, first: int, cells: list[str], widths: list[int]) -> str:
    return label.ljust(first) + "".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


def as_json(header: dict[str, Any], report: StructureReport) -> str:
    return json.dumps({**header, **asdict(report)}, indent=2)
