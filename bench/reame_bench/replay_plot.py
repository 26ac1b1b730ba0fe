"""`reame bench --replay`'s plots (PNG): each trace's cost against request index, a panel a way
of sending it, a line a server, the restart marked; the rag trace's time to first token and
speed-up against the share of passages shared with the question before."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reame.errors import ConfigError
from reame_bench.replay_report import Mode, Record
from reame_bench.replay_traces import OVERLAPS


def _pyplot() -> Any:
    try:
        # NOTE: imported here: only the plots need matplotlib, never the server
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            "the replay plots need matplotlib: pip install matplotlib (report.md and "
            "per_request.json were written)"
        ) from None
    return plt


def cost_png(
    trace: str,
    records: Sequence[Record],
    servers: Sequence[str],
    run_modes: Sequence[Mode],
    path: Path,
) -> None:
    plt = _pyplot()
    shown = [m for m in run_modes if any(r.mode == m.key for r in records)]
    columns = 2 if len(shown) > 1 else 1
    rows = -(-len(shown) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(6 * columns, 3.6 * rows), squeeze=False)
    for ax, mode in zip([a for row in axes for a in row], shown, strict=False):
        for server in servers:
            run = sorted((r for r in records if r.mode == mode.key and r.server == server
                          and not r.error), key=lambda r: r.index)  # fmt: skip
            if run:
                ax.plot([r.index for r in run], [r.total for r in run], marker=".",
                        markersize=4, linewidth=1, label=server)  # fmt: skip
        if mode.restart_after:
            ax.axvline(mode.restart_after + 0.5, color="grey", linestyle="--", label="restart")
        ax.set_title(mode.label)
        ax.set_xlabel("request")
        ax.set_ylabel("time a request (s)")
        ax.set_yscale("log")
        for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            axis(plt.FormatStrFormatter("%g"))
        ax.grid(True, alpha=0.3)
        ax.legend()
    for ax in [a for row in axes for a in row][len(shown) :]:
        ax.set_visible(False)
    figure.suptitle(f"reame bench --replay: {trace}")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def overlap_png(
    levels: dict[str, dict[float, dict[str, float | None]]], servers: Sequence[str], path: Path
) -> None:
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for server in servers:
        if server not in levels:
            continue
        # NOTE: a level no request had (a short trace) is left out, not drawn as a gap
        had = [(100 * v, f) for v in OVERLAPS if (f := levels[server][v])["ttft"] is not None]
        left.plot([x for x, _ in had], [f["ttft"] for _, f in had], marker="o", label=server)
        right.plot([x for x, _ in had], [f["speedup"] for _, f in had], marker="o", label=server)
    left.set_ylabel("time to first token (s, median)")
    right.set_ylabel("speed-up over no shared passage")
    for ax in (left, right):
        ax.set_xlabel("passages shared with the question before (%)")
        ax.grid(True, alpha=0.3)
        ax.legend()
    left.set_ylim(bottom=0)
    figure.suptitle("reame bench --replay: rag")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
