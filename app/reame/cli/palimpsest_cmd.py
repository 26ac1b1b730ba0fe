"""`reame palimpsest stats|clear`: the archive of finished generations that drafts come from."""

from __future__ import annotations

import argparse
from pathlib import Path

from reame.cli.common import state_directory
from reame.speculation.palimpsest_records import archive_stats, clear_archive


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("palimpsest", help="what the archive of earlier answers holds; clear it")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_text, handler in (
        ("stats", "files, records, tokens and bytes per tokenizer", stats),
        ("clear", "remove every archive file", clear),
    ):
        a = psub.add_parser(name, help=help_text)
        a.add_argument("--dir", type=Path, help="archive directory (default: palimpsest_dir)")
        a.add_argument("--config", type=Path, help="config file (default: ./reame.conf)")
        a.set_defaults(handler=handler)


def _root(args: argparse.Namespace) -> tuple[Path, int]:
    root, settings = state_directory(args, lambda s: s.palimpsest_path)
    return root, settings.palimpsest_mb


def stats(args: argparse.Namespace) -> int:
    root, budget_mb = _root(args)
    found = archive_stats(root) if root.exists() else []
    print(f"directory: {root} (budget {budget_mb} MB per tokenizer)")
    for s in found:
        print(
            f"{s.fingerprint}: {s.files} file(s), {s.records} answers, {s.tokens} tokens, "
            f"{s.num_bytes / (1 << 20):.1f} MB; damaged {s.damaged}, set aside {s.set_aside}"
        )
    if not found:
        print("empty")
    return 0


def clear(args: argparse.Namespace) -> int:
    root, _ = _root(args)
    removed = clear_archive(root) if root.exists() else 0
    print(f"removed {removed} file(s) from {root}")
    return 0
