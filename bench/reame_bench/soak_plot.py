"""`reame bench --soak`'s samples as a CSV and a PNG plot against time."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from reame.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Sample:
    """The server process and its stores at one moment of the soak."""

    t_s: float
    rss_mb: float
    fds: int
    threads: int
    prefix_cache_mb: float
    palimpsest_mb: float
    # what the server holds in memory within budgets (the prefix cache's RAM tier, sessions,
    # the Palimpsest), from its /metrics: RSS beyond it is what must stay flat
    memory_stores_mb: float
    requests: int  # finished so far
    errors_5xx: int  # so far, as the clients saw them


def write_csv(samples: Sequence[Sample], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[x.name for x in fields(Sample)])
        writer.writeheader()
        for s in samples:
            writer.writerow(asdict(s))


def write_png(samples: Sequence[Sample], path: Path) -> None:
    try:
        # NOTE: imported here: only this plot needs matplotlib, never the server
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError(
            "the soak plot needs matplotlib: pip install matplotlib (the CSV was written)"
        ) from None
    minutes = [s.t_s / 60 for s in samples]
    figure, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    panels = (
        (
            axes[0][0],
            "RSS (MB)",
            [
                ("rss", [s.rss_mb for s in samples]),
                ("rss beyond budgeted stores", [s.rss_mb - s.memory_stores_mb for s in samples]),
            ],
        ),
        (axes[0][1], "open file descriptors", [("fds", [s.fds for s in samples])]),
        (axes[1][0], "threads", [("threads", [s.threads for s in samples])]),
        (
            axes[1][1],
            "stores (MB)",
            [
                ("prefix cache on disk", [s.prefix_cache_mb for s in samples]),
                ("palimpsest on disk", [s.palimpsest_mb for s in samples]),
                ("in memory", [s.memory_stores_mb for s in samples]),
            ],
        ),
    )
    for ax, title, series in panels:
        for label, values in series:
            ax.plot(minutes, values, marker="o", markersize=3, label=label)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        if len(series) > 1:
            ax.legend()
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    figure.suptitle("reame bench --soak")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
