"""`reame bench --load` and `--soak`: a real `reame serve` started here, or one --url."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from reame.errors import ConfigError
from reame_bench.cli.settings import progress


def bench_load(args: argparse.Namespace) -> int:
    from reame_bench import load_report
    from reame_bench.load_client import ClientPlan
    from reame_bench.load_runner import bench_load as run_load
    from reame_bench.load_target import LoadTarget, ServeOptions
    from reame_bench.soak_runner import bench_soak

    if args.load and args.soak or len(args.url) > 1 or (args.soak and args.url):
        raise ConfigError("give --load or --soak; --load takes at most one --url, --soak none")
    clients = args.clients or (4 if args.soak else 64)
    if clients < 1 or args.requests < 1 or min(args.seconds, args.minutes, args.interval) <= 0:
        raise ConfigError("--clients, --requests, --seconds, --minutes, --interval: above 0")
    seed = args.seed if args.seed is not None else 0
    if args.url:
        target = LoadTarget.open(args.url[0], args.api_key, args.context_length)
    else:
        target = LoadTarget.start(ServeOptions.of(args))
    if args.soak:
        out = args.out or Path(tempfile.mkdtemp(prefix="reame-soak-"))
        return bench_soak(target, clients, args.minutes, args.interval, seed, out, progress)
    pacing = ClientPlan(clients, args.requests, args.seconds, seed=seed)
    header, figures, details = run_load(target, pacing, progress)
    if args.json:
        print(load_report.as_json(header, figures))
    else:
        print(load_report.as_table(header, figures, details))
    return 0 if figures.ok else 1
