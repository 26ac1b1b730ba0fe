"""`reame`: the command line. Every failure a user can fix ends in one line and a non-zero exit."""

from __future__ import annotations

import argparse
import sys

from reame import __version__
from reame.cli import (
    bench_cmd,
    cache_cmd,
    config_cmd,
    health_cmd,
    models_cmd,
    palimpsest_cmd,
    run_cmd,
    serve_cmd,
)
from reame.errors import ReameError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reame",
        description="CPU-only LLM inference server on llama.cpp that never computes the same "
        "thing twice.",
    )
    parser.add_argument("--version", action="version", version=f"reame {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve_cmd.register(sub)
    run_cmd.register(sub)
    models_cmd.register(sub)
    bench_cmd.register(sub)
    config_cmd.register(sub)
    health_cmd.register(sub)
    cache_cmd.register(sub)
    palimpsest_cmd.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except ReameError as exc:
        print(f"reame: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
