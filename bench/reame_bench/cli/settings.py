"""What every `reame bench` family shares: the settings (a synthetic model built first when
asked for) and the progress lines on stderr."""

from __future__ import annotations

import argparse
import sys

from reame.cli.common import settings_from_args
from reame.config import Settings


def bench_settings(args: argparse.Namespace) -> Settings:
    extra: dict[str, object] = {}
    if args.synthetic:
        from reame_bench.synthetic import build_synthetic

        pre = settings_from_args(args).settings
        threads = pre.threads or 2
        extra["model_path"] = build_synthetic(
            args.synthetic, pre.state_dir / "synthetic", num_threads=threads
        )
    return settings_from_args(args, **extra).settings


def progress(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)
