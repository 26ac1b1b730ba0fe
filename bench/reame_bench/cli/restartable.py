"""`reame bench --prefix` and `--spec`: Reame in process (on a directory of its own, restarted by
the bench) and/or --url servers, one table a workload."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from reame.errors import ConfigError
from reame.runtime import Runtime
from reame_bench.cli.settings import bench_settings, progress


def bench_prefix(args: argparse.Namespace) -> int:
    from reame_bench.prefix_runner import bench_prefix as run_prefix

    # NOTE: in process, a cache directory of its own, so that cold is cold
    tables = _bench_restartable(args, "--prefix", "prefix_cache_dir", run_prefix)
    _print_tables(tables, args.runs)
    return 0


def bench_spec(args: argparse.Namespace) -> int:
    from reame_bench.spec_runner import bench_spec as run_spec

    async def run(*common: Any) -> tuple[dict, dict]:
        return await run_spec(*common, args.completions, args.max_tokens)

    # NOTE: in process, an archive of its own, so that the teaching round teaches it
    tables, checks = _bench_restartable(args, "--spec", "palimpsest_dir", run)
    _print_tables(tables, args.runs)
    for name, ok in checks.items():
        print(f"{'yes' if ok else 'NO '}  {name}")
    return 0


def _bench_restartable(
    args: argparse.Namespace, flag: str, fresh_dir: str, runner: Callable[..., Awaitable[Any]]
) -> Any:
    """Reame in process (on a new, empty `fresh_dir`, restarted by the bench) and/or --url
    servers; `runner(targets, runs, after_restart, restarts, log)` does the rest."""
    from reame_bench.targets import HttpTarget, InProcessTarget, target_names

    if args.runs < 1:
        raise ConfigError("--runs must be at least 1")
    in_process = args.in_process or not args.url
    if args.after_restart and in_process:
        raise ConfigError(
            "--after-restart times servers that were just restarted: give --url, and no "
            f"--in-process (in process, {flag} restarts Reame itself)"
        )
    settings = bench_settings(args)
    if in_process:
        directory = Path(tempfile.mkdtemp(prefix=f"reame-bench-{flag.strip('-')}-"))
        settings = settings.model_copy(update={fresh_dir: directory})

    async def run() -> Any:
        targets: list = []
        restarts = {}
        if in_process:
            target = InProcessTarget(Runtime(settings), owns_runtime=True)

            async def restart() -> None:
                target.replace_runtime(Runtime(settings))

            targets.append(target)
            restarts[target.name] = restart
        try:
            names = target_names(args.url, args.name, in_process=in_process)
            for url, name in zip(args.url, names, strict=True):
                targets.append(await HttpTarget.open(url, name, args.api_key))
            return await runner(targets, args.runs, args.after_restart, restarts, progress)
        finally:
            for t in targets:
                await t.aclose()

    return asyncio.run(run())


def _print_tables(tables: dict, runs: int) -> None:
    from reame_bench.http_report import as_table

    for title, figures in tables.items():
        print(f"== {title}")
        print(as_table({"runs": runs}, figures))
        print()
