"""`reame bench`: seeded workloads, Reame beside a plain llama-cpp-python loop, with ratios; with
--url, OpenAI-compatible servers (and Reame in process) side by side."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from reame.bench import structured_cli
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
    add_settings_flags(p, with_spec_mode=False)
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
        "--structure",
        action="store_true",
        help="decode speed with Il Suggeritore on and off (and no speculation) on fresh lists, "
        "tables, JSON arrays and prose; greedy outputs compared; in process",
    )
    c.add_argument(
        "--completions",
        action="store_true",
        help="with --spec: text completions instead of chats (for a base model such as "
        "gemma3-270m, which has no chat template)",
    )
    c.add_argument(
        "--conclave",
        action="store_true",
        help="a quiz: one greedy answer, 5 sampled answers in turn, and a Conclave of 5 (with "
        "and without its early stop): wall time, tokens and accuracy; in process",
    )
    c.add_argument(
        "--after-restart",
        action="store_true",
        help="with --prefix --url: the servers were just restarted; time their first request",
    )
    ld = p.add_argument_group(
        "load and soak: a real `reame serve` started on 127.0.0.1, or one --url on this machine"
    )
    ld.add_argument(
        "--load",
        action="store_true",
        help="many clients at once (a seeded mix of chats, streams, dropped streams, Conclaves, "
        "sessions, oversize and malformed requests): statuses, latency, 5xx, 429s with "
        "Retry-After, slots freed after; exits 1 when a check fails",
    )
    ld.add_argument(
        "--soak",
        action="store_true",
        help="a few clients with think time for --minutes, sampling the server's RSS, file "
        "descriptors, threads and store sizes into a CSV and a PNG; exits 1 on any 5xx",
    )
    ld.add_argument("--clients", type=int, help="concurrent clients (default 64; --soak 4)")
    ld.add_argument("--requests", type=int, default=2000, help="--load: requests at most")
    ld.add_argument("--seconds", type=float, default=90.0, help="--load: seconds at most")
    ld.add_argument("--max-waiting", type=int, default=8, help="the started server's queue")
    ld.add_argument("--minutes", type=float, default=30.0, help="--soak: how long")
    ld.add_argument("--interval", type=float, default=60.0, help="--soak: seconds a sample")
    ld.add_argument("--out", type=Path, help="--soak: where soak.csv and soak.png go")
    structured_cli.add_flags(p)
    p.set_defaults(handler=bench)


def bench(args: argparse.Namespace) -> int:
    if args.structured:
        return structured_cli.bench(args, _progress)
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


def bench_load(args: argparse.Namespace) -> int:
    from reame.bench import load_report
    from reame.bench.load_client import ClientPlan
    from reame.bench.load_runner import bench_load as run_load
    from reame.bench.load_target import LoadTarget, ServeOptions
    from reame.bench.soak_runner import bench_soak

    if args.load and args.soak or len(args.url) > 1 or (args.soak and args.url):
        raise ConfigError("give --load or --soak; --load takes at most one --url, --soak none")
    clients = args.clients or (4 if args.soak else 64)
    if clients < 1 or args.requests < 1 or min(args.seconds, args.minutes, args.interval) <= 0:
        raise ConfigError("--clients, --requests, --seconds, --minutes, --interval: above 0")
    seed = args.seed if args.seed is not None else 0
    if args.url:
        target = LoadTarget.open(args.url[0], args.api_key, args.context_length)
    else:
        options = ServeOptions(
            args.model,
            args.threads,
            args.context_length,
            args.batch_size,
            args.parallel,
            args.models_dir,
            args.config,
            args.max_waiting,
        )
        target = LoadTarget.start(options)
    if args.soak:
        out = args.out or Path(tempfile.mkdtemp(prefix="reame-soak-"))
        return bench_soak(target, clients, args.minutes, args.interval, seed, out, _progress)
    pacing = ClientPlan(clients, args.requests, args.seconds, seed=seed)
    header, figures, details = run_load(target, pacing, _progress)
    if args.json:
        print(load_report.as_json(header, figures))
    else:
        print(load_report.as_table(header, figures, details))
    return 0 if figures.ok else 1


def bench_prefix(args: argparse.Namespace) -> int:
    from reame.bench.prefix_runner import bench_prefix as run_prefix

    # NOTE: in process, a cache directory of its own, so that cold is cold
    tables = _bench_restartable(args, "--prefix", "prefix_cache_dir", run_prefix)
    _print_tables(tables, args.runs)
    return 0


def bench_spec(args: argparse.Namespace) -> int:
    from reame.bench.spec_runner import bench_spec as run_spec

    async def run(*common: Any) -> tuple[dict, dict]:
        return await run_spec(*common, args.completions)

    # NOTE: in process, an archive of its own, so that the teaching round teaches it
    tables, checks = _bench_restartable(args, "--spec", "palimpsest_dir", run)
    _print_tables(tables, args.runs)
    for name, ok in checks.items():
        print(f"{'yes' if ok else 'NO '}  {name}")
    return 0


def bench_conclave(args: argparse.Namespace) -> int:
    from reame.bench.conclave_runner import QUIZ, N
    from reame.bench.conclave_runner import bench_conclave as run_conclave

    if args.url or args.runs < 1:
        raise ConfigError("--conclave runs in process, with --runs of at least 1 and no --url")
    # NOTE: no Palimpsest: every mode writes the same seeded texts, and whichever came later
    # would draft them from the archive the earlier one filled
    settings = _settings(args).model_copy(update={"palimpsest": False})
    if settings.parallel is None:  # NOTE: --parallel below N measures candidates that wait
        settings = settings.model_copy(update={"parallel": N})
    # NOTE: a synthetic model writes noise: every candidate runs to max_tokens, its answers are
    # no answers, and 3 questions time it as well as 10
    questions = 3 if args.synthetic else len(QUIZ)
    with Runtime(settings) as runtime:
        rows, checks = asyncio.run(
            run_conclave(
                runtime,
                args.runs,
                args.max_tokens,
                _progress,
                num_questions=questions,
                ignore_eos=bool(args.synthetic),
            )
        )
        print(f"model: {runtime.model.name}; threads {runtime.tuned.threads}; runs {args.runs}")
    for title, row in rows.items():
        print(f"== {title}")
        for key, value in row.items():
            print(f"  {key:<40} {value:10.3f}")
    for name, ok in checks.items():
        print(f"{'yes' if ok else 'NO '}  {name}")
    return 0


def bench_structure(args: argparse.Namespace) -> int:
    from reame.bench import structure_report
    from reame.bench.structure_engines import bench_in_process

    if args.url or args.in_process or args.runs < 1:
        raise ConfigError("--structure runs in process, with --runs of at least 1 and no --url")
    settings = _settings(args)
    report = bench_in_process(settings, args.runs, _progress)
    header = {"model": str(settings.model_path or settings.model), "runs": args.runs}
    print((structure_report.as_json if args.json else structure_report.as_table)(header, report))
    return 0


def _bench_restartable(
    args: argparse.Namespace, flag: str, fresh_dir: str, runner: Callable[..., Awaitable[Any]]
) -> Any:
    """Reame in process (on a new, empty `fresh_dir`, restarted by the bench) and/or --url
    servers; `runner(targets, runs, after_restart, restarts, log)` does the rest."""
    from reame.bench.targets import HttpTarget, InProcessTarget, target_names

    if args.runs < 1:
        raise ConfigError("--runs must be at least 1")
    in_process = args.in_process or not args.url
    if args.after_restart and in_process:
        raise ConfigError(
            "--after-restart times servers that were just restarted: give --url, and no "
            f"--in-process (in process, {flag} restarts Reame itself)"
        )
    settings = _settings(args)
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
            return await runner(targets, args.runs, args.after_restart, restarts, _progress)
        finally:
            for t in targets:
                await t.aclose()

    return asyncio.run(run())


def _print_tables(tables: dict, runs: int) -> None:
    from reame.bench.http_report import as_table

    for title, figures in tables.items():
        print(f"== {title}")
        print(as_table({"runs": runs}, figures))
        print()


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
