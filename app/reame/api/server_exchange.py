"""What every route does with its request and its response: the body read and validated, the
key read from either header, a stream of server-sent events written out (heartbeats, a client
that stops reading cut off), and the request counted.

NOTE: the api/server*.py modules are the only ones that use sanic (imported once, in
sanic_kit.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from reame import metrics
from reame.api.errors import ApiError, from_validation_error
from reame.api.heartbeat import with_heartbeats
from reame.api.request_checks import check_text
from reame.api.sanic_kit import BadRequest, Request

log = structlog.get_logger("reame.api")

Body = TypeVar("Body", bound=BaseModel)


@dataclass(slots=True, frozen=True)
class StreamLimits:
    heartbeat_seconds: float  # a comment line after this long with nothing to send
    timeout_seconds: float  # a client that takes no bytes for this long is cut off


def authorization(request: Request) -> str | None:
    """The request's key as a bearer credential: Anthropic's clients send `x-api-key`; the
    same key is the same owner either way."""
    header = request.headers.get("authorization")
    if header is None and (key := request.headers.get("x-api-key")):
        return f"Bearer {key}"
    return header


def parse(
    request: Request,
    model: type[Body],
    check: Callable[[dict[str, object]], None] | None = None,
) -> Body:
    """The body validated; `check` runs first on the raw JSON (a cap on its size of work)."""
    try:
        body = request.json
    except BadRequest as exc:
        raise ApiError(400, "The request body is not valid JSON", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object", code="invalid_json")
    if check is not None:
        check(body)
    check_text(body)
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise from_validation_error(exc, body) from exc


async def send_stream(
    request: Request, frames: AsyncIterator[str], headers: dict[str, str], limits: StreamLimits
) -> None:
    """Server-sent events as they come, with heartbeats while none do; a client that stops
    reading is cut off (its work ends as the frames close)."""
    request.ctx.is_stream = True
    response = await request.respond(
        content_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-request-id": request.ctx.request_id} | headers,
    )
    frames = with_heartbeats(frames, limits.heartbeat_seconds)
    timeout = limits.timeout_seconds
    try:
        async with contextlib.aclosing(frames):  # NOTE: a client gone stops its work now
            async for chunk in frames:
                await asyncio.wait_for(response.send(chunk), timeout)
        await asyncio.wait_for(response.eof(), timeout)
    except TimeoutError:
        log.info("client stopped reading: cut off", seconds=timeout)
        metrics.CUT_OFF_CLIENTS.inc()
        request.transport.abort()
        return
    observe(request, 200)


def observe(request: Request, status: int) -> None:
    route = request.route.path if request.route else "unmatched"
    metrics.REQUESTS.labels(route, str(status)).inc()
    started = getattr(request.ctx, "started", None)
    if started is not None:
        metrics.REQUEST_SECONDS.labels(route).observe(time.perf_counter() - started)
