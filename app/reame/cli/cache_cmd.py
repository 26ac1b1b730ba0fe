"""`reame cache ls|stats|verify|prune|clear`: the prefix cache directory."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from reame.cache import maintenance
from reame.cli.common import state_directory
from reame.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="list, check, prune or clear the prefix cache on disk")
    csub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_text, handler in (
        ("ls", "list snapshots, most recently used first", list_cache),
        ("stats", "files, bytes and budget", stats),
        ("verify", "check every file whole; remove the bad ones", verify),
        ("prune", "remove least recently used files until within the budget", prune),
        ("clear", "remove every snapshot", clear),
    ):
        a = csub.add_parser(name, help=help_text)
        a.add_argument("--dir", type=Path, help="cache directory (default: prefix_cache_dir)")
        a.add_argument("--config", type=Path, help="config file (default: ./reame.conf)")
        if name == "prune":
            a.add_argument("--max-mb", type=int, help="budget (default: prefix_cache_disk_mb)")
        a.set_defaults(handler=handler)


def _root(args: argparse.Namespace) -> tuple[Path, int]:
    root, settings = state_directory(args, lambda s: s.prefix_cache_path)
    return root, settings.prefix_cache_disk_mb


def _mb(num_bytes: int) -> str:
    return f"{num_bytes / (1 << 20):.1f} MB"


def list_cache(args: argparse.Namespace) -> int:
    root, _ = _root(args)
    now = time.time()
    for item in maintenance.listing(root):
        tokens = "?" if item.num_tokens is None else str(item.num_tokens)
        age = now - item.file.last_used
        print(
            f"{tokens:>7} tokens  {_mb(item.file.num_bytes):>10}  used {age:8.0f} s ago  "
            f"{item.fingerprint}  {item.file.path.name}"
        )
    return 0


def stats(args: argparse.Namespace) -> int:
    root, budget_mb = _root(args)
    files = maintenance.stored(root)
    total = sum(f.num_bytes for f in files)
    models = {maintenance.fingerprint_of(f.path) for f in files}
    print(f"directory: {root}")
    print(f"snapshots: {len(files)} of {len(models)} model fingerprint(s)")
    print(f"bytes:     {_mb(total)} of a {budget_mb} MB budget")
    return 0


def verify(args: argparse.Namespace) -> int:
    root, _ = _root(args)
    good, bad = maintenance.verify(root)
    for path, why in bad:
        print(f"removed {path}: {why}")
    print(f"{good} good, {len(bad)} bad (removed)")
    return 0


def prune(args: argparse.Namespace) -> int:
    root, budget_mb = _root(args)
    max_mb = args.max_mb if args.max_mb is not None else budget_mb
    if max_mb < 0:
        raise ConfigError("--max-mb must be 0 or more")
    removed, left = maintenance.prune(root, max_mb << 20)
    print(f"removed {removed} snapshot(s); {_mb(left)} left")
    return 0


def clear(args: argparse.Namespace) -> int:
    root, _ = _root(args)
    print(f"removed {maintenance.clear(root)} snapshot(s) from {root}")
    return 0
