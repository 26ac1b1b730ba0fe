"""`reame bench`: seeded workloads, Reame beside a plain llama-cpp-python loop, with ratios; with
--url, OpenAI-compatible servers (and Reame in process) side by side. `reame bench ARGS` hands
ARGS to `main` (reame's own `reame bench` is a thin command that needs this package)."""

from __future__ import annotations

import argparse
import asyncio
from contextlib import nullcontext

from reame.errors import ConfigError
from reame.runtime import Runtime
from reame_bench.cli import structured
from reame_bench.cli.again import bench_again
from reame_bench.cli.cluster import bench_cluster
from reame_bench.cli.exam import bench_exam
from reame_bench.cli.flags import add_flags
from reame_bench.cli.hostile import bench_hostile
from reame_bench.cli.in_process import bench_conclave, bench_structure
from reame_bench.cli.load import bench_load
from reame_bench.cli.replay import bench_replay
from reame_bench.cli.restartable import bench_prefix, bench_spec
from reame_bench.cli.settings import bench_settings, progress
from reame_bench.report import as_json, as_table
from reame_bench.runner import bench_engine


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reame bench")
    add_flags(parser)
    return parser


def main(argv: list[str]) -> int:
    """`reame bench`'s flags in `argv`; a ConfigError (a ReameError) for a mistake a user can fix,
    which `reame` prints as one line."""
    return bench(build_parser().parse_args(argv))


def bench(args: argparse.Namespace) -> int:
    family_defaults(args)
    if args.replay:
        return bench_replay(args)
    if args.build_only:
        if not args.synthetic:
            raise ConfigError("--build-only goes with --synthetic SHAPE")
        print(bench_settings(args).model_path)
        return 0
    if args.step_costs:
        return bench_step_costs(args)
    if args.structured:
        return structured.bench(args, progress)
    if args.exam is not None:
        return bench_exam(args)
    if args.again is not None:
        return bench_again(args)
    if args.cluster:
        return bench_cluster(args)
    if args.hostile:
        return bench_hostile(args)
    if args.load or args.soak:
        return bench_load(args)
    if args.prefix and args.spec:
        raise ConfigError("--prefix and --spec are separate benches: give one")
    if args.prefix:
        return bench_prefix(args)
    if args.spec:
        return bench_spec(args)
    if args.structure:
        return bench_structure(args)
    if args.conclave:
        return bench_conclave(args)
    if args.after_restart:
        raise ConfigError("--after-restart goes with --prefix or --spec")
    if args.url or args.in_process:
        return bench_servers(args)
    settings = bench_settings(args)
    with Runtime(settings) as runtime:
        header = {
            "model": runtime.model.name
            + (
                " (SYNTHETIC: random weights with the shapes of "
                f"{args.synthetic}; its text is noise, its costs are "
                "real)"
                if args.synthetic
                else ""
            ),
            "file": str(runtime.model_path),
            "threads": runtime.tuned.threads,
            "context_length": runtime.tuned.context_length,
            "batch_size": runtime.tuned.batch_size,
            "parallel": runtime.tuned.parallel,
            "runs": args.runs,
            "prompt_tokens": args.prompt_tokens,
            "max_tokens": args.max_tokens,
        }
        figures = bench_engine(runtime, args.runs, args.prompt_tokens, args.max_tokens, progress)
    print(as_json(header, figures) if args.json else as_table(header, figures))
    return 0


def family_defaults(args: argparse.Namespace) -> None:
    """The flags whose default depends on the bench: --replay's requests are fewer and shorter."""
    for flag, default, replay in (
        ("max_tokens", 128, 32), ("requests", 2000, 100), ("system_words", 600, 400)
    ):  # fmt: skip
        if getattr(args, flag) is None:
            setattr(args, flag, replay if args.replay else default)


def bench_servers(args: argparse.Namespace) -> int:
    from reame_bench import http_report, http_runner

    if not args.url:
        raise ConfigError(
            "--in-process adds Reame's engine beside --url targets: give at least one --url "
            "(`reame bench` alone compares the engine with a plain loop)"
        )
    if args.synthetic and not args.in_process:
        raise ConfigError("--synthetic builds a model for --in-process; a server loads its own")
    runtime_cm = Runtime(bench_settings(args)) if args.in_process else nullcontext()
    with runtime_cm as runtime:
        header, figures = asyncio.run(
            http_runner.bench_servers(
                args.url,
                args.name,
                args.api_key,
                runtime,
                args.runs,
                args.prompt_tokens,
                args.max_tokens,
                progress,
                args.seed,
            )
        )
    report = http_report.as_json if args.json else http_report.as_table
    print(report(header, figures))
    return 0


def bench_step_costs(args: argparse.Namespace) -> int:
    from reame.llama.model import Model
    from reame.runtime import model_file
    from reame_bench.step_costs import as_table, measure

    settings = bench_settings(args)
    with Model(model_file(settings)) as model:
        name = model.name + (
            f" (synthetic {args.synthetic}: random weights)" if args.synthetic else ""
        )
        costs = measure(model, settings.threads or 2, repeats=max(args.runs, 3))
    print(as_table(f"{name}, {model.memory_kind}", costs))
    return 0
