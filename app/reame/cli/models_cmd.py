"""`reame models` and `reame pull MODEL`."""

from __future__ import annotations

import argparse

from reame.autotune import DEFAULT_CONTEXT_CAP, DEFAULT_PARALLEL
from reame.cli.common import add_settings_flags, settings_from_args
from reame.models.resolve import list_models, pull


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pull", help="download a model into the models directory")
    add_settings_flags(p)
    p.set_defaults(handler=pull_model)
    m = sub.add_parser("models", help="list the catalog and what is present locally")
    add_settings_flags(m, with_model=False)
    m.set_defaults(handler=show_models)


def pull_model(args: argparse.Namespace) -> int:
    settings = settings_from_args(args).settings
    path = pull(args.model or settings.model, settings.models_dir, settings.hub_endpoint)
    print(path)
    return 0


def show_models(args: argparse.Namespace) -> int:
    settings = settings_from_args(args).settings
    rows = list_models(settings.models_dir)
    width = max(len("ALIAS"), *(len(row.alias) for row in rows))
    # SIZE is what is on disk here; RAM is for the automatic settings (see default_ram_bytes)
    print(f"{'ALIAS':<{width}} {'SIZE':>9}  {'WHERE':<10} {'MEMORY':<9} {'RAM':>9}  DESCRIPTION")
    indent = " " * (width + 1 + 9 + 2 + 10 + 1 + 9 + 1 + 9 + 2)
    for row in rows:
        size = _bytes(row.size_bytes) if row.size_bytes else "-"
        where = row.source or "not here"
        print(
            f"{row.alias:<{width}} {size:>9}  {where:<10} {row.memory:<9} "
            f"{_bytes(row.ram_bytes):>9}  {row.description}"
        )
        if row.path:
            print(f"{indent}{row.path}")
    print(
        f"\nRAM: the file plus the f16 KV cache of {DEFAULT_PARALLEL} sequences x "
        f"{DEFAULT_CONTEXT_CAP} tokens (the automatic --parallel and --context-length).\n"
        "A hybrid keeps KV in its attention layers only, plus a fixed recurrent state per "
        "sequence.\n"
        'Models that think ("thinks unless told not to") write a thought before each answer: '
        'it comes back as reasoning_content; a request\'s "reasoning_effort": "none" turns '
        'it off, "reasoning_budget" bounds it (docs/models.md).'
    )
    return 0


def _bytes(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"
