"""`reame health`: ask a running server whether it is healthy (the container's HEALTHCHECK)."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from pathlib import Path

from reame.cli.common import settings_from_args

_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("health", help="check a running server's /health; exit 1 with the reason")
    p.add_argument("--url", help="server address (default: from the settings' host and port)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for an answer")
    p.add_argument("--config", type=Path, help="config file (default: ./reame.conf if present)")
    p.set_defaults(handler=check_health)


def check_health(args: argparse.Namespace) -> int:
    url = args.url or default_url(args)
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=args.timeout) as r:
            body = r.read()
    except urllib.error.HTTPError as exc:
        print(f"unhealthy: {reason(exc.read()) or exc.reason}")
        return 1
    except OSError as exc:
        print(f"no answer from {url} ({getattr(exc, 'reason', exc)}): still starting, or down")
        return 1
    print(json.loads(body).get("status", "ok"))
    return 0


def default_url(args: argparse.Namespace) -> str:
    settings = settings_from_args(args, default_log_level="error").settings
    host = _ANY_ADDRESS.get(settings.host, settings.host)
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}"


def reason(body: bytes) -> str:
    try:
        answer = json.loads(body)
    except ValueError:
        return body.decode(errors="replace")[:200]
    error = answer.get("error")
    return answer.get("reason") or (error.get("message") if isinstance(error, dict) else "")
