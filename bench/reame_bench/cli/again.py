"""`reame bench --again`: the same request sent again, against --url servers (again_runner.py)."""

from __future__ import annotations

import argparse
import asyncio

from reame.errors import ConfigError
from reame_bench.cli.settings import progress


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the same request again: against --url servers")
    g.add_argument(
        "--again",
        type=int,
        metavar="N",
        help="N extraction requests over one document, each sent once and then again "
        "(--again-runs times), whole and streamed: the time of a request sent again against "
        "its first",
    )
    g.add_argument("--again-runs", type=int, default=3, help="times each is sent again")


def bench_again(args: argparse.Namespace) -> int:
    from reame_bench.again_runner import check, report, run_target
    from reame_bench.targets import HttpTarget, target_names

    if not args.url:
        raise ConfigError("--again measures --url servers: give at least one")
    if problems := check(args.again, args.again_runs):
        raise ConfigError("; ".join(problems))

    async def run() -> dict:
        results = {}
        for url, name in zip(args.url, target_names(args.url, args.name, False), strict=True):
            target = await HttpTarget.open(url, name, args.api_key)
            try:
                results[name] = await run_target(target, args.again, args.again_runs, progress)
            finally:
                await target.aclose()
        return results

    print(report(asyncio.run(run())))
    return 0
