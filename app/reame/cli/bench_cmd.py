"""`reame bench`: hands its arguments to the benchmark harness, a distribution of its own
(`reame-bench`, in bench/ of a clone) that the server does not ship; without it, one line saying
how to install it."""

from __future__ import annotations

import argparse
import sys

MISSING = (
    "reame bench needs the benchmark harness: python3 -m pip install -e ./bench "
    "(from a clone of Reame)"
)


def register(sub: argparse._SubParsersAction) -> None:
    # NOTE: no option of its own (prefix_chars no argument starts with, no -h): every argument,
    # --help and `--` included, is the harness's, which parses them as `reame bench`
    p = sub.add_parser(
        "bench",
        help="measure Reame against a plain llama-cpp-python loop, or servers side by side (--url)",
        prefix_chars="\0",
        add_help=False,
    )
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(handler=bench)


def bench(args: argparse.Namespace) -> int:
    try:
        from reame_bench.cli.main import main
    except ModuleNotFoundError as exc:
        if exc.name != "reame_bench":
            raise
        print(MISSING, file=sys.stderr)
        return 2
    return main(args.argv)
