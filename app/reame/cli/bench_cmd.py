"""`reame bench`: seeded workloads, Reame beside a plain llama-cpp-python loop, with ratios."""

from __future__ import annotations

import argparse
import sys

from reame.bench.report import as_json, as_table
from reame.bench.runner import bench_engine
from reame.cli.common import add_settings_flags, settings_from_args
from reame.runtime import Runtime


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure Reame against a plain llama-cpp-python loop")
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
    p.set_defaults(handler=bench)


def bench(args: argparse.Namespace) -> int:
    extra: dict[str, object] = {}
    if args.synthetic:
        from reame.bench.synthetic import build_synthetic

        pre = settings_from_args(args).settings
        threads = pre.threads or 2
        extra["model_path"] = build_synthetic(
            args.synthetic, pre.state_dir / "synthetic", num_threads=threads
        )
    settings = settings_from_args(args, **extra).settings

    def progress(msg: str) -> None:
        print(f"bench: {msg}", file=sys.stderr, flush=True)

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
