"""`reame bench --soak`: a few clients with think time on one server for minutes, sampling the
server process (RSS, file descriptors, threads) and its stores' sizes, to see whether anything
grows that should stay flat."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reame_bench.load_client import ClientPlan, Outcome, run_clients
from reame_bench.load_mix import SOAK_WEIGHTS, plan
from reame_bench.load_report import LoadFigures, summarize
from reame_bench.load_runner import counted_5xx
from reame_bench.load_target import LoadTarget
from reame_bench.serve_process import read_metrics
from reame_bench.soak_plot import Sample

# what "flat" means: RSS may grow while caches warm, so the last third of the run is compared
# with the first third; descriptors and threads are counted objects, so only a few may be added
RSS_GROWTH = 0.10  # the last third's max at most 10% above the first third's max
FD_SLACK = 8
THREAD_SLACK = 4


def proc_figures(pid: int) -> tuple[float, int, int]:
    """RSS in MB, open file descriptors and threads of a process, from /proc."""
    rss_kb, threads = 0, 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd")), threads


def dir_mb(root: Path) -> float:
    """The bytes of the files under `root` (0 if absent), in MB; files may go while it walks."""
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total / 2**20


MEMORY_STORES = (
    'reame_prefix_cache_bytes{tier="ram"}',
    "reame_session_bytes",
    "reame_palimpsest_resident_bytes",
)


async def memory_stores_mb(base: str, headers: dict[str, str]) -> float:
    """What the server's budgeted in-memory stores hold, by its own gauges (0 if unreadable)."""
    try:
        samples = await asyncio.to_thread(read_metrics, base, headers)
    except OSError:
        return 0.0
    return sum(samples.get(name, 0.0) for name in MEMORY_STORES) / 2**20


def sample_times(seconds: float, interval: float) -> list[float]:
    """0, interval, 2 interval, ... and the end itself."""
    times = [k * interval for k in range(int(seconds // interval) + 1)]
    if seconds - times[-1] > 1e-6:
        times.append(seconds)
    return times


@dataclass(frozen=True, slots=True)
class Verdict:
    series: str
    start: float
    end: float
    peak: float
    is_flat: bool | None  # None: reported, not judged (a store grows up to its budget)
    rule: str


def verdicts(samples: Sequence[Sample]) -> list[Verdict]:
    third = max(1, math.ceil(len(samples) / 3))

    def series(name: str) -> list[float]:
        return [float(getattr(s, name)) for s in samples]

    rss = series("rss_mb")
    beyond = [s.rss_mb - s.memory_stores_mb for s in samples]
    # NOTE: RSS itself is reported; judged is what it holds beyond the stores that grow up to a
    # budget by design (sessions, the RAM tier): that part must not grow
    beyond_flat = max(beyond[-third:]) <= max(beyond[:third]) * (1 + RSS_GROWTH)
    out = [
        Verdict("rss_mb", rss[0], rss[-1], max(rss), None, "reported; judged beyond the stores"),
        Verdict(
            "rss_beyond_stores_mb",
            beyond[0],
            beyond[-1],
            max(beyond),
            beyond_flat,
            f"last third's max <= first third's max + {RSS_GROWTH:.0%}",
        ),
    ]
    for name, slack in (("fds", FD_SLACK), ("threads", THREAD_SLACK)):
        v = series(name)
        out.append(
            Verdict(name, v[0], v[-1], max(v), v[-1] <= v[0] + slack, f"end <= start + {slack}")
        )
    for name in ("prefix_cache_mb", "palimpsest_mb"):
        v = series(name)
        out.append(Verdict(name, v[0], v[-1], max(v), None, "a store, bounded by its budget"))
    return out


async def _sampler(
    target: LoadTarget,
    outcomes: list[Outcome],
    times: Sequence[float],
    stop: asyncio.Event,
    log: Callable[[str], None],
) -> list[Sample]:
    process = target.process
    assert process is not None
    samples: list[Sample] = []
    started = time.monotonic()
    try:
        for t in times:
            await asyncio.sleep(max(0.0, started + t - time.monotonic()))
            if process.proc.poll() is not None:
                log(f"the server exited ({process.proc.returncode}): sampling ends")
                break
            rss, fds, threads = proc_figures(process.pid)
            stores = await memory_stores_mb(target.base, target.headers)
            num_5xx = sum(1 for o in outcomes if o.status is not None and o.status >= 500)
            sample = Sample(
                round(time.monotonic() - started, 1),
                round(rss, 1),
                fds,
                threads,
                round(dir_mb(process.state_dir / "prefix-cache"), 2),
                round(dir_mb(process.state_dir / "palimpsest"), 2),
                round(stores, 1),
                len(outcomes),
                num_5xx,
            )
            samples.append(sample)
            log(
                f"t={sample.t_s:.0f}s rss={sample.rss_mb}MB fds={fds} threads={threads} "
                f"requests={sample.requests} 5xx={num_5xx}"
            )
    finally:
        stop.set()
    return samples


async def run_soak(
    target: LoadTarget, clients: int, seconds: float, interval: float, seed: int, log
) -> tuple[list[Sample], LoadFigures]:
    outcomes: list[Outcome] = []
    stop = asyncio.Event()
    # NOTE: the clients' own bound is a backstop; the sampler stops them after its last sample
    pacing = ClientPlan(clients, None, seconds + 60, think=(0.5, 2.0), seed=seed)
    shape = target.shape
    samples, _ = await asyncio.gather(
        _sampler(target, outcomes, sample_times(seconds, interval), stop, log),
        run_clients(
            target.base,
            lambda i: plan(seed, i, shape, SOAK_WEIGHTS),
            pacing,
            outcomes,
            stop,
            target.headers,
        ),
    )
    figures = summarize(outcomes)
    figures.server_5xx = await counted_5xx(target.base, target.headers)
    return samples, figures


def soak_ok(figures: LoadFigures, samples: Sequence[Sample], expected: int) -> dict[str, bool]:
    return {
        "no 5xx (clients' count)": figures.num_5xx == 0,
        "no 5xx (server's /metrics)": figures.server_5xx == 0,
        "no connection error, hang or broken stream": not (
            figures.connection_errors or figures.hangs or figures.problems
        ),
        "the server lived to the last sample": len(samples) == expected,
    }


def soak_table(
    header: dict[str, object], figures: LoadFigures, found: Sequence[Verdict], checks: dict
) -> str:
    lines = [f"- {k}: {v}" for k, v in header.items()]
    lines += ["", "| series | start | end | max | flat | rule |", "|---|---:|---:|---:|---|---|"]
    for v in found:
        flat = "-" if v.is_flat is None else ("yes" if v.is_flat else "NO")
        lines.append(f"| {v.series} | {v.start:g} | {v.end:g} | {v.peak:g} | {flat} | {v.rule} |")
    statuses = " ".join(f"{s}:{n}" for s, n in figures.statuses.items())
    lines += ["", f"requests: {figures.sent} ({statuses})", ""]
    lines += [f"{'yes' if ok else 'NO '}  {name}" for name, ok in checks.items()]
    shown = [*figures.unexpected_statuses[:10], *figures.problems[:10], *figures.server_errors[:10]]
    if shown:
        lines += ["", "what went wrong (first of each):", *(f"  {line}" for line in shown)]
    return "\n".join(lines)


def bench_soak(
    target: LoadTarget,
    clients: int,
    minutes: float,
    interval: float,
    seed: int,
    out_dir: Path,
    log: Callable[[str], None],
) -> int:
    """Runs the soak, writes soak.csv and soak.png into `out_dir`, prints the summary; 1 when a
    check failed."""
    from reame_bench.soak_plot import write_csv, write_png

    seconds = minutes * 60
    times = sample_times(seconds, interval)
    log(f"soak: {clients} clients for {minutes:g} min, a sample every {interval:g} s")
    try:
        samples, figures = asyncio.run(run_soak(target, clients, seconds, interval, seed, log))
    finally:
        code = target.close()
    assert target.process is not None
    figures.server_errors = target.process.error_lines()
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = out_dir / "soak.csv", out_dir / "soak.png"
    header = {
        **target.detail,
        "clients": clients,
        "minutes": minutes,
        "interval s": interval,
        "seed": seed,
        "server exit code": code,
        "server log": str(target.process.log_path),
        "csv": str(csv_path),
        "png": str(png_path),
    }
    checks = soak_ok(figures, samples, len(times))
    if samples:
        write_csv(samples, csv_path)
        print(soak_table(header, figures, verdicts(samples), checks), flush=True)
        write_png(samples, png_path)
    return 0 if all(checks.values()) and samples else 1
