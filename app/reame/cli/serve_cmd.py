"""`reame serve [MODEL]`: load the model, start the engine, serve HTTP."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from pydantic import TypeAdapter, ValidationError

from reame.cli.common import add_settings_flags, settings_from_args
from reame.config import ENV_PREFIX, Settings
from reame.errors import ConfigError
from reame.host_memory import reuse_large_buffers
from reame.log import configure_logging


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
    p.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        default=None,
        help="serve without keys on an address other than loopback (refused otherwise)",
    )
    p.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
    from reame.api.server import hold, run_server  # NOTE: Sanic is imported only when serving

    try:
        loaded = settings_from_args(
            args,
            host=args.host,
            port=args.port,
            api_keys=args.api_keys,
            allow_unauthenticated=args.allow_unauthenticated,
        )
    except ConfigError as exc:
        address = hold_address(args, os.environ)
        if address is None:
            raise
        configure_logging(
            "info", "json" if os.environ.get("REAME_LOG_FORMAT") == "json" else "auto"
        )
        hold(exc, *address)
        return 0
    reuse_large_buffers(loaded.settings.prefix_cache_ram_mb << 20)
    run_server(loaded.settings)
    return 0


def hold_address(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, int] | None:
    """Where to report settings that do not load, when REAME_HOLD_ON_ERROR asks for it: the
    settings themselves are wrong, so the flags, the bare variables and the defaults decide."""
    try:
        wanted = TypeAdapter(bool).validate_python(environ.get(f"{ENV_PREFIX}HOLD_ON_ERROR") or 0)
    except ValidationError:
        return None
    if not wanted:
        return None
    fields = Settings.model_fields
    host = args.host or environ.get(f"{ENV_PREFIX}HOST") or fields["host"].default
    port = str(args.port or environ.get(f"{ENV_PREFIX}PORT", ""))
    return host, int(port) if port.isdigit() else fields["port"].default
