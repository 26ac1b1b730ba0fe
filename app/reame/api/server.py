"""One serving process: the settings checked and the runtime loaded (`prepare`), then the app
run behind the connection cap until it stops (`run_server`); or, when Reame cannot start,
every request answered with why (`hold`).

NOTE: the api/server*.py modules are the only ones that use sanic (imported once, in
sanic_kit.py).
"""

from __future__ import annotations

import os

import structlog

from reame.api.auth import is_loopback, load_api_keys
from reame.api.errors import ApiError
from reame.api.sanic_kit import HTTPResponse, Request, Sanic, json
from reame.api.server_app import HIDDEN_REASON, create_app
from reame.api.server_connections import CappedProtocol
from reame.api.server_errors import error_response
from reame.config import Settings
from reame.errors import ConfigError, ReameError
from reame.preflight import state_problem
from reame.runtime import Runtime

log = structlog.get_logger("reame.api")


class EngineDied(ReameError):
    """The engine thread died while serving: the process exits non-zero so it is restarted."""

    code = "engine_failed"


def run_server(settings: Settings) -> None:
    failure = None
    try:
        keys, problem, runtime = prepare(settings)
    except ReameError as exc:
        if not settings.hold_on_error:
            raise
        failure = exc  # NOTE: held outside this block, so nothing later chains onto it
    if failure is not None:
        hold(failure, settings.host, settings.port)
        return
    if problem:
        log.error("state not persisted", reason=problem)
    app = create_app(runtime, settings, keys, problem)
    log.info("serving", url=f"http://{settings.host}:{settings.port}", auth=bool(keys))
    if not keys and not is_loopback(settings.host):
        log.warning("no API keys configured: the server is unauthenticated", host=settings.host)
    CappedProtocol.max_connections = settings.max_connections
    app.run(
        host=settings.host,
        port=settings.port,
        single_process=True,
        access_log=False,
        protocol=CappedProtocol,
    )
    if app.ctx.state.failure is not None:
        raise EngineDied(app.ctx.state.failure)


def prepare(settings: Settings) -> tuple[list[str], str | None, Runtime]:
    """Keys, what is wrong with the state directories, and the loaded runtime."""
    # NOTE: what Reame writes (snapshots, the archive, fingerprints) is readable by its own user
    # only: a state directory can hold what other keys' users sent
    os.umask(0o077)
    keys = load_api_keys(settings)
    if settings.tenancy == "auto":  # NOTE: before the runtime: its archives are scoped by it
        settings.tenancy = "per_key" if len(keys) > 1 else "shared"
    if not keys and not settings.allow_unauthenticated and not is_loopback(settings.host):
        raise ConfigError(
            f"serving on {settings.host} without API keys would let anyone who reaches the "
            "port use this server: set api_key_file or api_keys (REAME_API_KEY_FILE, "
            "REAME_API_KEYS, --api-key), or allow_unauthenticated = true "
            "(--allow-unauthenticated) if something in front of it already checks who comes in"
        )
    if settings.best_of > settings.max_best_of:
        raise ConfigError(
            f"best_of is {settings.best_of}, but a Conclave here holds at most "
            f"{settings.max_best_of} candidates (max_best_of)"
        )
    problem = state_problem(settings)
    return keys, problem, Runtime(settings)  # NOTE: last: a bad key file fails before loading


def hold(error: ReameError, host: str, port: int) -> None:
    """Reame could not start: answer every request with why (503), /health included, so a
    container shows the reason in its health status instead of restarting in a loop."""
    log.error("cannot start", reason=str(error))
    failure = ApiError(503, f"Reame could not start: {error}", code=error.code)
    hidden = ApiError(503, f"Reame could not start: {HIDDEN_REASON}", code=error.code)
    app = Sanic("reame_hold", configure_logging=False)
    app.config.MOTD = False
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    @app.route("/", methods=methods, name="root")
    @app.route("/<path:path>", methods=methods)
    async def answer(request: Request, path: str = "") -> HTTPResponse:
        # NOTE: no key can be checked here (the keys may be what failed): loopback only
        told = failure if is_loopback(request.ip) else hidden
        if request.path == "/health":
            return json({"status": "error", "reason": told.message}, status=503)
        return error_response(told)

    app.run(host=host, port=port, single_process=True, access_log=False)
