"""`reame models` and `reame pull MODEL`."""

from __future__ import annotations

import argparse

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
    print(f"{'ALIAS':<14} {'SIZE':>9}  {'WHERE':<10} DESCRIPTION")
    for row in list_models(settings.models_dir):
        size = f"{row.size_bytes / 2**20:.0f} MiB" if row.size_bytes else "-"
        where = row.source or "not here"
        print(f"{row.alias:<14} {size:>9}  {where:<10} {row.description}")
        if row.path:
            print(f"{'':<14} {'':>9}  {'':<10} {row.path}")
    return 0
