"""Any exception a route or Sanic raises, as the OpenAI-shaped error response it answers
with: the engine's refusals and failures, Sanic's own errors (each keeping its status), and a
500 for anything unexpected (logged).

NOTE: the api/server*.py modules are the only ones that use sanic (imported once, in
sanic_kit.py).
"""

from __future__ import annotations

import re

import structlog

from reame.api.errors import ApiError
from reame.api.messages_convert import error_body as anthropic_error
from reame.api.sanic_kit import (
    HTTPResponse,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    Request,
    SanicException,
    json,
)
from reame.errors import EngineBusyError, EngineFailedError, InvalidRequestError

log = structlog.get_logger("reame.api")


def to_api_error(exc: Exception) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InvalidRequestError):
        return ApiError(400, str(exc), exc.param, exc.code)
    if isinstance(exc, EngineBusyError):
        return ApiError(429, str(exc), code=exc.code, headers={"retry-after": "1"})
    if isinstance(exc, EngineFailedError):
        return ApiError(503, str(exc), code=exc.code)
    if isinstance(exc, PayloadTooLarge):
        return ApiError(
            413, "The request body is larger than max_body_bytes", code="request_too_large"
        )
    if isinstance(exc, NotFound):
        return ApiError(404, "No such route", code="not_found")
    if isinstance(exc, MethodNotAllowed):
        return ApiError(405, "Method not allowed on this route", code="method_not_allowed")
    if isinstance(exc, SanicException):
        # NOTE: each of Sanic's own errors (404, 405, 408 request timeout, 417 Expect, 503
        # response timeout...) keeps its status, in OpenAI's shape
        code = type(exc).__name__
        code = re.sub(r"(?<!^)(?=[A-Z])", "_", code).lower()
        return ApiError(exc.status_code, str(exc) or code, code=code, headers=_headers_of(exc))
    log.exception("unexpected error")
    return ApiError(500, "Internal error; the server log has the details", code="internal_error")


def _headers_of(exc: SanicException) -> dict[str, str]:
    """The headers a Sanic error asks for (405's Allow, 416's Content-Range), as text."""
    return {str(k): str(v) for k, v in (getattr(exc, "headers", None) or {}).items()}


def error_response(error: ApiError) -> HTTPResponse:
    return json(error.body(), status=error.status, headers=error.headers)


def answer_error(request: Request, error: ApiError) -> HTTPResponse:
    """In the shape of the API the route speaks: Anthropic's on /v1/messages, else OpenAI's."""
    if request.path.startswith("/v1/messages"):
        return json(anthropic_error(error), status=error.status, headers=error.headers)
    return error_response(error)
