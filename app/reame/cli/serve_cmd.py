"""`reame serve [MODEL]`: load the model, start the engine, serve HTTP."""

from __future__ import annotations

import argparse

from reame.cli.common import add_settings_flags, settings_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="start the HTTP server")
    add_settings_flags(p)
    p.add_argument("--host", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument(
        "--api-key",
        action="append",
        dest="api_keys",
        metavar="KEY",
        help="require this bearer key on /v1/* (repeat for several; or REAME_API_KEYS)",
    )
    p.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
    from reame.api.server import run_server  # NOTE: Sanic is imported only when serving

    loaded = settings_from_args(args, host=args.host, port=args.port, api_keys=args.api_keys)
    run_server(loaded.settings)
    return 0
