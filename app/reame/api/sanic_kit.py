"""The one import of Sanic: the API's server modules (server.py, server_app.py,
server_connections.py, server_errors.py) take what they use of it from here."""

from sanic import Request, Sanic
from sanic.exceptions import (
    BadRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    SanicException,
)
from sanic.http import Stage
from sanic.response import HTTPResponse, json, raw
from sanic.server.protocols.http_protocol import HttpProtocol

__all__ = [
    "BadRequest",
    "HTTPResponse",
    "HttpProtocol",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "Request",
    "RequestTimeout",
    "Sanic",
    "SanicException",
    "Stage",
    "json",
    "raw",
]
