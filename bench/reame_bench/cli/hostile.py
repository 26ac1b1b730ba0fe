"""`reame bench --hostile`: a real `reame serve` started on 127.0.0.1, a victim's load on it
quiet, then the same load beside a hostile client."""

from __future__ import annotations

import argparse

from reame.errors import ConfigError
from reame_bench.cli.settings import progress


def bench_hostile(args: argparse.Namespace) -> int:
    from reame_bench import hostile_report
    from reame_bench.hostile_plan import ATTACKS
    from reame_bench.hostile_runner import HostileOptions
    from reame_bench.hostile_runner import bench_hostile as run_hostile
    from reame_bench.load_target import ServeOptions

    if args.url:
        raise ConfigError("--hostile starts its own server (two keys, a short client timeout)")
    attacks = tuple(a.strip() for a in args.attacks.split(",") if a.strip())
    if not attacks or set(attacks) - set(ATTACKS):
        raise ConfigError(f"--attacks: a comma list of {', '.join(ATTACKS)}")
    sizes = (args.clients or 2, args.rounds, args.prompt_list, args.flood, args.stalled)
    sizes += (args.slow, args.idle)
    if min(sizes) < 1 or args.seconds <= 0 or args.client_timeout <= 0:
        raise ConfigError(
            "--clients, --rounds, --prompt-list, --flood, --stalled, --slow, --idle: at least 1; "
            "--seconds, --client-timeout: above 0"
        )
    serve = ServeOptions.of(args)
    options = HostileOptions(
        serve,
        seconds=args.seconds,
        rounds=args.rounds,
        clients=args.clients or 2,
        attacks=attacks,
        client_timeout=args.client_timeout,
        prompt_list=args.prompt_list,
        flood=args.flood,
        stalled=args.stalled,
        slow=args.slow,
        idle=args.idle,
        seed=args.seed if args.seed is not None else 0,
    )
    header, figures = run_hostile(options, progress)
    report = hostile_report.as_json if args.json else hostile_report.as_table
    print(report(header, figures))
    return 0 if figures.ok else 1
