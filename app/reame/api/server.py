"""The HTTP server. NOTE: the only module that imports sanic.

This first cut serves what exists: liveness, readiness and the model list. The OpenAI
completion routes build on it.
"""

from __future__ import annotations

import time

import structlog
from sanic import Request, Sanic
from sanic.response import HTTPResponse, json

from reame.config import Settings
from reame.runtime import Runtime

log = structlog.get_logger("reame.api")


def create_app(runtime: Runtime) -> Sanic:
    app = Sanic("reame", configure_logging=False)
    app.config.MOTD = False
    started = int(time.time())

    @app.get("/health")
    async def health(_: Request) -> HTTPResponse:
        return json({"status": "ok"})

    @app.get("/ready")
    async def ready(_: Request) -> HTTPResponse:
        if runtime.engine.is_alive:
            return json({"status": "ready", "model": runtime.model.name})
        return json({"status": "engine stopped"}, status=503)

    @app.get("/v1/models")
    async def models(_: Request) -> HTTPResponse:
        return json(
            {
                "object": "list",
                "data": [
                    {
                        "id": runtime.settings.model,
                        "object": "model",
                        "created": started,
                        "owned_by": "reame",
                    }
                ],
            }
        )

    @app.after_server_stop
    async def close_runtime(*_: object) -> None:
        runtime.close()

    return app


def run_server(settings: Settings) -> None:
    runtime = Runtime(settings)
    app = create_app(runtime)
    log.info("serving", url=f"http://{settings.host}:{settings.port}")
    if settings.host in ("127.0.0.1", "localhost", "::1"):
        log.info("listening on loopback only; no API keys are configured yet")
    app.run(host=settings.host, port=settings.port, single_process=True, access_log=False)
