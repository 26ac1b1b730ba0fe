"""The OpenAPI 3.1 document of Reame's routes (served at /openapi.json). Pure.

Generated from the pydantic models that validate the requests (schemas.py) and describe the
responses (response_models.py), so the document cannot drift from what the server checks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from reame import __version__
from reame.api import response_models as out
from reame.api.messages_schemas import CountTokensRequest, MessagesRequest
from reame.api.responses_schemas import ResponsesRequest
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.api.tokenize import DetokenizeRequest, TokenizeRequest
from reame.api.warm import WarmRequest

REF = "#/components/schemas/{model}"

_ERRORS = {
    "400": "Malformed JSON, an unknown field, a wrong type or value, a prompt that does not fit",
    "401": "No valid API key (`Authorization: Bearer <key>`)",
    "404": "An unknown model, route or session",
    "413": "A body over max_body_bytes",
    "429": "Every sequence and waiting place is taken; retry after Retry-After seconds",
    "503": "The server is shutting down, or its engine is not running",
}


class _Components:
    """Collects each model's schema, with its nested models hoisted beside it."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def ref(self, model: type[BaseModel]) -> dict[str, str]:
        schema = model.model_json_schema(ref_template=REF, mode="validation")
        for name, sub in {**schema.pop("$defs", {}), model.__name__: schema}.items():
            known = self.schemas.setdefault(name, sub)
            # NOTE: two different models of one name would silently describe one wrongly
            assert known == sub, f"two schemas are named {name}"
        return {"$ref": REF.format(model=model.__name__)}


def _headers(*required: str) -> dict[str, Any]:
    headers = {
        "X-Request-Id": {
            "description": "The request's id: the client's X-Request-Id, or a new one",
            "schema": {"type": "string"},
        }
    }
    for name in required:
        headers[name] = {"required": True, "schema": {"type": "string"}}
    return headers


def _json(schema: dict[str, Any], description: str, *headers: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": _headers(*headers),
        "content": {"application/json": {"schema": schema}},
    }


def _errors(error: dict[str, str], *statuses: str) -> dict[str, Any]:
    return {
        status: _json(error, _ERRORS[status], *(("Retry-After",) if status == "429" else ()))
        for status in statuses
    }


def _request_id_parameter() -> dict[str, Any]:
    return {
        "name": "X-Request-Id",
        "in": "header",
        "required": False,
        "description": "An id for this request, echoed back and carried by its log lines",
        "schema": {"type": "string"},
    }


def _event(c: _Components, chunk: type[BaseModel]) -> dict[str, Any]:
    """One server-sent event of a stream (the schema of 3.1 describes each event): a chunk, an
    error that ended the stream after it began, or the closing `[DONE]`."""
    payload = {"anyOf": [c.ref(chunk), c.ref(out.ErrorBody)]}
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {"const": "message"},
            "data": {
                "anyOf": [
                    {"const": "[DONE]"},
                    {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": payload,
                    },
                ]
            },
        },
    }


def _generation(
    c: _Components,
    request: type[BaseModel],
    response: type[BaseModel],
    chunk: type[BaseModel],
    summary: str,
) -> dict[str, Any]:
    error = c.ref(out.ErrorBody)
    ok = _json(c.ref(response), "The answer; with `stream: true`, server-sent events")
    ok["content"]["text/event-stream"] = {"schema": _event(c, chunk)}
    ok["headers"]["X-Reame-Route"] = {
        "description": "What a proxy hashes to keep a conversation on one replica (a chat's, or a "
        "call's with a session id): reame.route_key, docs/http-api.md",
        "schema": {"type": "string"},
    }
    ok["headers"]["X-Reame-Conclave"] = {
        "description": "After a Conclave (best_of above 1), not streamed: how many candidates "
        "agreed on the answer, of how many, e.g. 2/3 (docs/conclave.md)",
        "schema": {"type": "string", "pattern": "^[0-9]+/[0-9]+$"},
    }
    return {
        "post": {
            "operationId": response.__name__[0].lower() + response.__name__[1:],
            "summary": summary,
            "parameters": [
                _request_id_parameter(),
                {
                    "name": "X-Reame-Session",
                    "in": "header",
                    "required": False,
                    "description": "The session whose state this call keeps (as `session_id`)",
                    "schema": {"type": "string"},
                },
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": c.ref(request)}},
            },
            "responses": {"200": ok, **_errors(error, "400", "401", "404", "413", "429", "503")},
        }
    }


def _get(
    c: _Components,
    operation_id: str,
    summary: str,
    response: type[BaseModel],
    statuses: tuple[str, ...],
    path_parameter: str | None = None,
) -> dict[str, Any]:
    parameters = [_request_id_parameter()]
    if path_parameter:
        parameters.append(
            {"name": path_parameter, "in": "path", "required": True, "schema": {"type": "string"}}
        )
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": parameters,
        "responses": {
            "200": _json(c.ref(response), summary),
            **_errors(c.ref(out.ErrorBody), *statuses),
        },
    }


def _post(
    c: _Components,
    operation_id: str,
    summary: str,
    request: type[BaseModel],
    response: type[BaseModel],
    statuses: tuple[str, ...],
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "post": {
            "operationId": operation_id,
            "summary": summary,
            "parameters": [_request_id_parameter()],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": c.ref(request)}},
            },
            "responses": {
                "200": _json(c.ref(response), summary),
                **_errors(error or c.ref(out.ErrorBody), *statuses),
            },
        }
    }


STREAMED_STATUSES = ("400", "401", "404", "413", "429", "503")


def _streamed_post(
    c: _Components,
    operation_id: str,
    summary: str,
    request: type[BaseModel],
    response: type[BaseModel],
    error: dict[str, str],
) -> dict[str, Any]:
    """A route answering its body as JSON, or with `stream: true` as named events."""
    route = _post(c, operation_id, summary, request, response, STREAMED_STATUSES, error)
    route["post"]["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": {
            "type": "object",
            "required": ["data"],
            "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
        }
    }
    return route


def _messages(c: _Components) -> dict[str, Any]:
    """Anthropic's routes: their errors in Anthropic's shape, a stream of named events."""
    error = c.ref(out.AnthropicError)
    return {
        "/v1/messages": _streamed_post(
            c,
            "createMessage",
            "Anthropic's Messages API (docs/messages-api.md)",
            MessagesRequest,
            out.AnthropicMessage,
            error,
        ),
        "/v1/messages/count_tokens": _post(
            c,
            "countMessageTokens",
            "A Messages prompt's tokens",
            CountTokensRequest,
            out.TokenCount,
            ("400", "401", "404", "413", "503"),
            error,
        ),
    }


def _responses(c: _Components, v1: tuple[str, ...]) -> dict[str, Any]:
    """OpenAI's Responses routes: a stream of typed events; stored responses by id."""
    one = ("response_id",)
    return {
        "/v1/responses": _streamed_post(
            c,
            "createResponse",
            "OpenAI's Responses API (docs/responses-api.md)",
            ResponsesRequest,
            out.ResponseObject,
            c.ref(out.ErrorBody),
        ),
        "/v1/responses/{response_id}": {
            "get": _get(
                c, "getResponse", "A stored response", out.ResponseObject, ("404", *v1), *one
            ),
            "delete": _get(
                c,
                "deleteResponse",
                "Delete a stored response",
                out.ResponseDeleted,
                ("404", *v1),
                *one,
            ),
        },
    }


def document() -> dict[str, Any]:
    c = _Components()
    v1 = ("401", "503")  # every /v1 route: without a key, while draining
    session = ("session_id",)
    paths = {
        "/v1/chat/completions": _generation(
            c, ChatRequest, out.ChatCompletion, out.ChatCompletionChunk, "A chat answer"
        ),
        "/v1/completions": _generation(
            c, CompletionRequest, out.TextCompletion, out.TextCompletionChunk, "A completion"
        ),
        "/v1/models": {"get": _get(c, "listModels", "The model served", out.ModelList, v1)},
        "/v1/models/{name}": {
            "get": _get(c, "getModel", "One model", out.ModelCard, ("404", *v1), "name")
        },
        "/v1/sessions": {"get": _get(c, "listSessions", "The sessions kept", out.SessionList, v1)},
        "/v1/sessions/{session_id}": {
            "get": _get(c, "getSession", "One session", out.Session, ("404", *v1), *session),
            "delete": _get(
                c, "deleteSession", "End a session", out.SessionDeleted, ("404", *v1), *session
            ),
        },
        **_messages(c),
        **_responses(c, v1),
        "/v1/warm": _post(
            c,
            "warm",
            "Compute a prompt or messages into the prefix cache, without an answer",
            WarmRequest,
            out.Warmed,
            ("400", "401", "404", "413", "429", "503"),
        ),
        "/tokenize": _post(
            c,
            "tokenize",
            "Text to token ids (llama-server's shape)",
            TokenizeRequest,
            out.Tokenized,
            ("400", "401", "413"),
        ),
        "/detokenize": _post(
            c,
            "detokenize",
            "Token ids to text (llama-server's shape)",
            DetokenizeRequest,
            out.Detokenized,
            ("400", "401", "413"),
        ),
        "/health": {
            "get": {
                **_get(c, "health", "Liveness", out.Health, ()),
                "security": [],
                "responses": {
                    "200": _json(c.ref(out.Health), "Alive"),
                    "503": _json(c.ref(out.Health), "Degraded or failing, and why"),
                },
            }
        },
        "/ready": {
            "get": {
                **_get(c, "ready", "Model loaded and engine stepping", out.Ready, ("503",)),
                "security": [],
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Reame",
            "version": __version__,
            "description": "An OpenAI-compatible API served by Reame on llama.cpp",
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(c.schemas.items())),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "One of the server's API keys (only when it has keys)",
                }
            },
        },
        "security": [{"bearer": []}],
    }
