"""The Sanic app over a loaded runtime: the OpenAI routes (chat, completions, models), the
session routes, /v1/warm, /tokenize and /detokenize, health, readiness, OpenAPI and metrics
(Anthropic's Messages routes are added from server_messages.py, OpenAI's Responses routes from
server_responses.py), and the hooks around every request (the key, refusal once the engine died
or the server drains, request ids, metrics, the drain at shutdown). Everything it serves is
built in calls.py, openai_format.py, schemas.py, warm.py and tokenize.py.

NOTE: the api/server*.py modules are the only ones that use sanic (imported once, in
sanic_kit.py).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import structlog

from reame import metrics
from reame.answer_memory import AnswerMemory
from reame.api import openapi
from reame.api.auth import is_authorized, is_loopback, key_owner
from reame.api.calls import Call
from reame.api.chat_turn import ThinkingDefaults
from reame.api.errors import ApiError
from reame.api.request_checks import is_text
from reame.api.sanic_kit import HTTPResponse, Request, Sanic, json, raw
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.api.served import Served
from reame.api.server_errors import answer_error, error_response, to_api_error
from reame.api.server_exchange import StreamLimits, authorization, observe, parse, send_stream
from reame.api.server_messages import add_messages_routes
from reame.api.server_responses import add_responses_routes
from reame.api.tokenize import DetokenizeRequest, TokenizeRequest, detokenize, tokenize
from reame.api.warm import WarmRequest, warm
from reame.cache.prefix_reuse import SessionKey
from reame.config import Settings
from reame.responses_store import ResponseStore
from reame.route_key import route_headers
from reame.runtime import Runtime

log = structlog.get_logger("reame.api")

SESSION_HEADER = "x-reame-session"
CONCLAVE_HEADER = "X-Reame-Conclave"  # a Conclave's agreement, "2/3" (docs/conclave.md)
MAX_SESSION_ID = 128  # as the body's session_id field
# NOTE: Sanic cuts a response that sent nothing for RESPONSE_TIMEOUT (60 s by default): a 7B
# answer on a 2-core VM takes minutes. Work in flight is bounded by max_tokens and
# max_wait_seconds instead; a stream keeps its connection alive with heartbeats.
NO_RESPONSE_TIMEOUT = 7 * 24 * 3600
EXIT_AFTER_DEATH_SECONDS = 2.0  # /health says why for this long before the process exits
CLIENT_CLOSED = 499  # nginx's status for a request its client closed before the answer
HIDDEN_REASON = "the reason is in the server log (and shown to loopback clients and key holders)"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
KEYED_PATHS = ("/tokenize", "/detokenize")  # besides /v1/*: what a key holder may do


@dataclass(slots=True)
class ServerState:
    num_active: int = 0  # calls being answered, streams included
    is_draining: bool = False  # /ready says 503
    is_refusing: bool = False  # new calls get 503 (after drain_accept_seconds)
    failure: str | None = None  # the engine died: why


def model_names(settings: Settings, runtime: Runtime) -> tuple[str, frozenset[str]]:
    spec = str(settings.model_path) if settings.model_path else settings.model
    model_id = Path(spec).stem if spec.endswith(".gguf") else spec
    return model_id, frozenset({model_id, spec, runtime.model.name, runtime.model_path.stem})


def answer_memory(settings: Settings, runtime: Runtime, has_keys: bool) -> AnswerMemory | None:
    """The answer memory of this model (None: off); under per-key tenancy a key holds its
    key_share of it."""
    if not settings.answer_memory:
        return None
    budget = settings.answer_memory_mb << 20
    per_key = has_keys and settings.tenancy == "per_key"
    return AnswerMemory(
        settings.answers_path,
        runtime.model_path,
        runtime.fingerprint.key,
        budget,
        math.ceil(settings.key_share * budget) if per_key else None,
        runtime.shared,
    )


def create_app(
    runtime: Runtime, settings: Settings, keys: list[str], problem: str | None = None
) -> Sanic:
    """`problem`: what is wrong with the deployment while serving goes on; /health says it."""
    app = Sanic("reame", configure_logging=False)
    app.config.MOTD = False
    app.config.REQUEST_MAX_SIZE = settings.max_body_bytes
    app.config.GRACEFUL_SHUTDOWN_TIMEOUT = settings.drain_seconds
    app.config.RESPONSE_TIMEOUT = NO_RESPONSE_TIMEOUT
    app.config.REQUEST_TIMEOUT = settings.client_timeout_seconds  # a slow sender is cut off
    app.config.KEEP_ALIVE_TIMEOUT = settings.client_timeout_seconds
    model_id, names = model_names(settings, runtime)
    sessions = runtime.service.sessions
    served = Served(
        runtime.service,
        model_id,
        names,
        settings.max_n,
        settings.best_of,
        settings.max_best_of,
        settings.vote_on,
        settings.named_vote_rules,
        settings.tenancy == "per_key",
        ThinkingDefaults(settings.reasoning_budget, settings.reasoning_effort_budgets),
        settings.reasoning_format == "inline",
        explore=settings.conclave_temperature,
        memory=answer_memory(settings, runtime, bool(keys)),
        fingerprint=runtime.fingerprint.key,
        key_places=(
            max(1, math.ceil(settings.key_share * runtime.service.engine.max_places))
            if keys
            else None
        ),
    )
    started = int(time.time())
    state = app.ctx.state = ServerState()
    limits = StreamLimits(settings.sse_heartbeat_seconds, settings.client_timeout_seconds)
    openapi_document = openapi.document()

    def needs_key(path: str) -> bool:
        return bool(keys) and (
            path.startswith("/v1/")
            or path in KEYED_PATHS
            or (path == "/metrics" and settings.metrics_auth)
        )

    @app.after_server_start
    async def watch_engine(_: Sanic) -> None:
        loop = asyncio.get_running_loop()

        def died(reason: str) -> None:  # on the engine thread
            loop.call_soon_threadsafe(engine_died, reason)

        runtime.service.on_failure(died)

    def engine_died(reason: str) -> None:
        """Say why on /health and /ready, refuse new calls, then exit non-zero: a supervisor
        (compose, systemd) restarts a process, not a thread."""
        state.failure = reason
        log.critical("cannot serve: exiting", reason=reason)
        asyncio.get_running_loop().call_later(EXIT_AFTER_DEATH_SECONDS, app.stop)

    @app.on_request
    async def begin(request: Request) -> HTTPResponse | None:
        given = request.headers.get("x-request-id", "")
        request.ctx.request_id = given if _REQUEST_ID.fullmatch(given) else uuid4().hex
        request.ctx.started = time.perf_counter()
        request.ctx.is_stream = False
        request.ctx.auth = authorization(request)
        request.ctx.owner = key_owner(request.ctx.auth, keys)
        structlog.contextvars.bind_contextvars(request_id=request.ctx.request_id)
        # NOTE: the key first: why the server fails is for those who may use it
        if needs_key(request.path) and not is_authorized(request.ctx.auth, keys):
            return answer_error(
                request,
                ApiError(
                    401,
                    "Incorrect API key provided: send 'Authorization: Bearer <key>' (or "
                    "'x-api-key: <key>')",
                    code="invalid_api_key",
                ),
            )
        if state.failure is not None and request.path.startswith("/v1/"):
            return answer_error(request, ApiError(503, state.failure, code="engine_failed"))
        if state.is_refusing and request.path.startswith("/v1/"):
            return answer_error(
                request,
                ApiError(
                    503,
                    "The server is shutting down",
                    code="shutting_down",
                    headers={"retry-after": "5"},
                ),
            )
        return None

    @app.on_response
    async def end(request: Request, response: HTTPResponse) -> None:
        request_id = getattr(request.ctx, "request_id", None)
        if request_id:
            response.headers["x-request-id"] = request_id
        if not getattr(request.ctx, "is_stream", False):
            # NOTE: Sanic answers a request whose client left (RequestCancelled) with a 500 that
            # reaches nobody: counted as nginx's 499, the client's doing, not a server error
            lost = request.conn_info is not None and request.conn_info.lost
            observe(request, CLIENT_CLOSED if lost else response.status)

    def engine_problem() -> str | None:
        return state.failure or runtime.service.failure

    def shown(request: Request, reason: str) -> str:
        """A failure's reason, for loopback (a container's health check) and key holders."""
        authorized = not keys or is_authorized(request.ctx.auth, keys)
        return reason if authorized or is_loopback(request.ip) else HIDDEN_REASON

    @app.get("/health")
    async def health(request: Request) -> HTTPResponse:
        if failure := engine_problem():
            return json({"status": "error", "reason": shown(request, failure)}, status=503)
        if problem:
            return json({"status": "degraded", "reason": shown(request, problem)}, status=503)
        return json({"status": "ok"})

    @app.get("/ready")
    async def ready(request: Request) -> HTTPResponse:
        if failure := engine_problem():
            return error_response(ApiError(503, shown(request, failure), code="not_ready"))
        if state.is_draining:  # a proxy's health check takes this replica out of rotation
            return error_response(ApiError(503, "The server is shutting down", code="draining"))
        return json({"status": "ready", "model": model_id})

    @app.get("/openapi.json")
    async def openapi_route(_: Request) -> HTTPResponse:
        return json(openapi_document)

    @app.get("/metrics")
    async def metrics_route(_: Request) -> HTTPResponse:
        body, content_type = metrics.exposition()
        return raw(body, content_type=content_type)

    @app.get("/v1/models")
    async def models(_: Request) -> HTTPResponse:
        card = {"id": model_id, "object": "model", "created": started, "owned_by": "reame"}
        return json({"object": "list", "data": [card]})

    @app.get("/v1/models/<name:path>")
    async def model(_: Request, name: str) -> HTTPResponse:
        if name not in names:
            raise ApiError(404, f"The model '{name}' does not exist", "model", "model_not_found")
        return json({"id": model_id, "object": "model", "created": started, "owned_by": "reame"})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> HTTPResponse | None:
        served.check_key_room(request.ctx.owner)  # NOTE: before the body is parsed
        return await serve_call(request, parse(request, ChatRequest))

    @app.post("/v1/completions")
    async def completions(request: Request) -> HTTPResponse | None:
        served.check_key_room(request.ctx.owner)
        return await serve_call(
            request, parse(request, CompletionRequest, served.check_prompt_list)
        )

    @app.post("/v1/warm")
    async def warm_route(request: Request) -> HTTPResponse:
        served.check_key_room(request.ctx.owner)
        body = parse(request, WarmRequest)
        state.num_active += 1  # NOTE: as a call: SIGTERM drains it
        try:
            return json(await warm(served, body, request.ctx.owner))
        finally:
            state.num_active -= 1

    @app.post("/tokenize")
    async def tokenize_route(request: Request) -> HTTPResponse:
        served.check_key_room(request.ctx.owner)
        body = parse(request, TokenizeRequest)
        async with served.place(request.ctx.owner):
            return json(await asyncio.to_thread(tokenize, runtime.model, body))

    @app.post("/detokenize")
    async def detokenize_route(request: Request) -> HTTPResponse:
        served.check_key_room(request.ctx.owner)
        body = parse(request, DetokenizeRequest)
        async with served.place(request.ctx.owner):
            return json(await asyncio.to_thread(detokenize, runtime.model, body))

    async def serve_call(
        request: Request, body: ChatRequest | CompletionRequest
    ) -> HTTPResponse | None:
        session_id = body.session_id or request.headers.get(SESSION_HEADER)
        # NOTE: Sanic reads header bytes that are not UTF-8 as lone surrogates, which no JSON
        # answer could carry back (GET /v1/sessions)
        if session_id is not None and (
            not 0 < len(session_id) <= MAX_SESSION_ID or not is_text(session_id)
        ):
            raise ApiError(
                400,
                f"A session id is 1 to {MAX_SESSION_ID} characters of UTF-8 text",
                "session_id",
                "invalid_value",
            )
        call = Call(served, body, session_id, request.ctx.owner)
        messages = request.json.get("messages") if isinstance(body, ChatRequest) else None
        route = route_headers(body.model, messages, session_id)
        state.num_active += 1  # NOTE: counted until the last byte, so SIGTERM drains it
        try:
            await call.start()
            route |= call.headers()
            if not body.stream:
                answer = await call.response()
                if call.verdict is not None:  # NOTE: so a split vote can go elsewhere unread
                    route[CONCLAVE_HEADER] = call.verdict.tally.agreement()
                return json(answer, headers=route)
            await send_stream(request, call.frames(), route, limits)
            return None
        finally:
            state.num_active -= 1
            await call.close()

    add_messages_routes(app, served, state, limits)
    responses = ResponseStore(
        settings.responses_path,
        settings.max_responses,
        settings.responses_disk_mb << 20,
        max(1, math.ceil(settings.key_share * settings.max_responses)) if keys else None,
    )
    add_responses_routes(app, served, state, limits, responses)

    @app.get("/v1/sessions")
    async def list_sessions(request: Request) -> HTTPResponse:
        owned = sessions.list(request.ctx.owner)
        return json({"object": "list", "data": [s.describe() for s in owned]})

    @app.get("/v1/sessions/<session_id>")
    async def get_session(request: Request, session_id: str) -> HTTPResponse:
        session = sessions.get(session_id, request.ctx.owner)
        if session is None:
            raise ApiError(404, f"No session '{session_id}'", "session_id", "session_not_found")
        return json(session.describe())

    @app.delete("/v1/sessions/<session_id>")
    async def delete_session(request: Request, session_id: str) -> HTTPResponse:
        if not runtime.service.reuse.unpin(SessionKey(request.ctx.owner, session_id)):
            raise ApiError(404, f"No session '{session_id}'", "session_id", "session_not_found")
        return json({"id": session_id, "object": "session.deleted", "deleted": True})

    @app.exception(Exception)
    async def on_error(request: Request, exc: Exception) -> HTTPResponse:
        return answer_error(request, to_api_error(exc))

    @app.before_server_stop
    async def drain(*_: object) -> None:
        """Not ready at once; new calls still served for drain_accept_seconds (a proxy's checks
        notice meanwhile), then refused; calls in flight (streams included) finish for up to
        drain_seconds more. Sanic's own grace period does not keep a streaming handler going."""
        state.is_draining = True
        accepting_until = time.monotonic() + settings.drain_accept_seconds
        deadline = accepting_until + settings.drain_seconds
        while time.monotonic() < deadline:
            if not state.is_refusing and time.monotonic() >= accepting_until:
                state.is_refusing = True
                if state.num_active:
                    log.info("draining", requests=state.num_active, seconds=settings.drain_seconds)
            if state.is_refusing and not state.num_active:
                break
            # NOTE: a short tick: once shutdown begins, wake-ups from the engine thread
            # (call_soon_threadsafe) no longer reliably wake the loop, so events are picked up
            # at each tick (at 50 ms a drained stream crawled at 20 tokens a second)
            await asyncio.sleep(0.005)

    @app.after_server_stop
    async def close_runtime(*_: object) -> None:
        runtime.close()

    return app
