"""`reame bench`: seeded workloads, Reame beside a plain llama-cpp-python loop, with ratios; with
--url, OpenAI-compatible servers (and Reame in process) side by side."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from reame.bench.report import as_json, as_table
from reame.bench.runner import bench_engine
from reame.cli.common import add_settings_flags, settings_from_args
from reame.config import Settings
from reame.errors import ConfigError
from reame.runtime import Runtime


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="measure Reame against a plain llama-cpp-python loop, or servers side by side (--url)",
    )
    add_settings_flags(p)
    p.add_argument(
        "--synthetic",
        metavar="SHAPE",
        help="build (once) and bench a random-weight GGUF with a real model's shapes: "
        "qwen2.5-1.5b, qwen2.5-7b, olmoe-1b-7b",
    )
    p.add_argument("--runs", type=int, default=3, help="repetitions; medians are reported")
    p.add_argument("--prompt-tokens", type=int, default=512, help="prompt length for prefill")
    p.add_argument("--max-tokens", type=int, default=128, help="tokens generated per request")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    h = p.add_argument_group("servers (OpenAI-compatible: a running Reame, llama-server, Ollama)")
    h.add_argument(
        "--url",
        action="append",
        default=[],
        help="bench this server instead of the plain loop; repeat to compare servers side by side, "
        "with ratios against the first; they should serve the same model, threads and slots",
    )
    h.add_argument("--api-key", metavar="KEY", help="bearer token sent to every --url")
    h.add_argument(
        "--seed",
        type=int,
        help="prompt seed, to send the prompts of an earlier run again (default: new prompts, "
        "so that no server's prompt cache has seen them)",
    )
    h.add_argument(
        "--name",
        action="append",
        default=[],
        help="a name for each --url, in order (default: its host:port)",
    )
    h.add_argument(
        "--in-process",
        action="store_true",
        help="with --url: also run the workloads on Reame's engine in this process (model and "
        "settings as given here), as the first target, so the ratios read HTTP over in-process",
    )
    c = p.add_argument_group("prefix cache workloads")
    c.add_argument(
        "--prefix",
        action="store_true",
        help="time to first token behind a shared 1.5k-word system prompt (cold, warm, after a "
        "restart), per turn of a conversation, and against the share of a 2k-word prefix; "
        "in process (Reame restarted on its own cache directory) and/or against --url servers",
    )
    c.add_argument(
        "--spec",
        action="store_true",
        help="decode speed with speculation off, on and auto: repeated and reworded requests "
        "(also after a restart), adversarial ones, 4 concurrent streams; in process (on an "
        "archive of its own) and/or against --url servers",
    )
    c.add_argument(
        "--completions",
        action="store_true",
        help="with --spec: text completions instead of chats (for a base model such as "
        "gemma3-270m, which has no chat template)",
    )
    c.add_argument(
        "--after-restart",
        action="store_true",
        help="with --prefix --url: the servers were just restarted; time their first request",
    )
    p.set_defaults(handler=bench)


def bench(args: argparse.Namespace) -> int:
    if args.prefix and args.spec:
        raise ConfigError("--prefix and --spec are separate benches: give one")
    if args.prefix:
        return bench_prefix(args)
    if args.spec:
        return bench_spec(args)
    if args.after_restart:
        raise ConfigError("--after-restart goes with --prefix or --spec")
    if args.url or args.in_process:
        return bench_servers(args)
    settings = _settings(args)
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
        figures = bench_engine(runtime, args.runs, args.prompt_tokens, args.max_tokens, _progress)
    print(as_json(header, figures) if args.json else as_table(header, figures))
    return 0


def bench_servers(args: argparse.Namespace) -> int:
    from reame.bench import http_report, http_runner

    if not args.url:
        raise ConfigError(
            "--in-process adds Reame's engine beside --url targets: give at least one --url "
            "(`reame bench` alone compares the engine with a plain loop)"
        )
    if args.synthetic and not args.in_process:
        raise ConfigError("--synthetic builds a model for --in-process; a server loads its own")
    runtime_cm = Runtime(_settings(args)) if args.in_process else nullcontext()
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
                _progress,
                args.seed,
            )
        )
    report = http_report.as_json if args.json else http_report.as_table
    print(report(header, figures))
    return 0


def bench_prefix(args: argparse.Namespace) -> int:
    from reame.bench.http_report import as_table as figures_table
    from reame.bench.prefix_runner import bench_prefix as run_prefix
    from reame.bench.targets import HttpTarget, InProcessTarget, target_names

    if args.runs < 1:
        raise ConfigError("--runs must be at least 1")
    in_process = args.in_process or not args.url
    if args.after_restart and in_process:
        raise ConfigError(
            "--after-restart times servers that were just restarted: give --url, and no "
            "--in-process (in process, --prefix restarts Reame itself)"
        )
    settings = _settings(args)
    if in_process:  # NOTE: its own empty cache directory, so that cold is cold
        cache_dir = Path(tempfile.mkdtemp(prefix="reame-bench-prefix-"))
        settings = settings.model_copy(update={"prefix_cache_dir": cache_dir})

    async def run() -> dict:
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
            return await run_prefix(targets, args.runs, args.after_restart, restarts, _progress)
        finally:
            for t in targets:
                await t.aclose()

    tables = asyncio.run(run())
    for title, figures in tables.items():
        print(f"== {title}")
        print(figures_table({"runs": args.runs}, figures))
        print()
    return 0


def bench_spec(args: argparse.Namespace) -> int:
    from reame.bench.http_report import as_table as figures_table
    from reame.bench.spec_runner import bench_spec as run_spec
    from reame.bench.targets import HttpTarget, InProcessTarget, target_names

    if args.runs < 1:
        raise ConfigError("--runs must be at least 1")
    in_process = args.in_process or not args.url
    if args.after_restart and in_process:
        raise ConfigError(
            "--after-restart times servers that were just restarted: give --url, and no "
            "--in-process (in process, --spec restarts Reame itself)"
        )
    settings = _settings(args)
    if in_process:  # NOTE: an archive of its own, so that the teaching round teaches it
        archive = Path(tempfile.mkdtemp(prefix="reame-bench-palimpsest-"))
        settings = settings.model_copy(update={"palimpsest_dir": archive})

    async def run() -> tuple[dict, dict]:
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
            return await run_spec(
                targets, args.runs, args.after_restart, restarts, _progress, args.completions
            )
        finally:
            for t in targets:
                await t.aclose()

    tables, checks = asyncio.run(run())
    for title, figures in tables.items():
        print(f"== {title}")
        print(figures_table({"runs": args.runs}, figures))
        print()
    for name, ok in checks.items():
        print(f"{'yes' if ok else 'NO '}  {name}")
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    extra: dict[str, object] = {}
    if args.synthetic:
        from reame.bench.synthetic import build_synthetic

        pre = settings_from_args(args).settings
        threads = pre.threads or 2
        extra["model_path"] = build_synthetic(
            args.synthetic, pre.state_dir / "synthetic", num_threads=threads
        )
    return settings_from_args(args, **extra).settings


def _progress(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)
