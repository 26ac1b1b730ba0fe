"""The HTTP server: OpenAI routes, SSE, sessions, bearer auth, metrics. NOTE: the only module
that imports sanic; everything it serves is built in calls.py, openai_format.py and schemas.py."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import structlog
from pydantic import ValidationError
from sanic import Request, Sanic
from sanic.exceptions import BadRequest, MethodNotAllowed, NotFound, PayloadTooLarge
from sanic.response import HTTPResponse, json, raw

from reame import metrics
from reame.api.auth import is_authorized, load_api_keys
from reame.api.calls import Call, Served
from reame.api.errors import ApiError, from_validation_error
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.autotune import DEFAULT_PARALLEL
from reame.config import Settings
from reame.errors import ConfigError, EngineBusyError, InvalidRequestError, ReameError
from reame.preflight import state_problem
from reame.runtime import Runtime
from reame.sessions import SessionStore

log = structlog.get_logger("reame.api")

SESSION_HEADER = "x-reame-session"


@dataclass(slots=True)
class ServerState:
    num_active: int = 0  # calls being answered, streams included
    is_draining: bool = False


def model_names(settings: Settings, runtime: Runtime) -> tuple[str, frozenset[str]]:
    spec = str(settings.model_path) if settings.model_path else settings.model
    model_id = Path(spec).stem if spec.endswith(".gguf") else spec
    return model_id, frozenset({model_id, spec, runtime.model.name, runtime.model_path.stem})


def create_app(
    runtime: Runtime, settings: Settings, keys: list[str], problem: str | None = None
) -> Sanic:
    """`problem`: what is wrong with the deployment while serving goes on; /health says it."""
    app = Sanic("reame", configure_logging=False)
    app.config.MOTD = False
    app.config.REQUEST_MAX_SIZE = settings.max_body_bytes
    app.config.GRACEFUL_SHUTDOWN_TIMEOUT = settings.drain_seconds
    model_id, names = model_names(settings, runtime)
    sessions = SessionStore(
        settings.max_sessions, settings.session_memory_mb * 2**20, settings.session_idle_seconds
    )
    served = Served(
        runtime,
        sessions,
        model_id,
        names,
        settings.max_n,
        settings.best_of,
        settings.max_best_of,
        settings.vote_on,
    )
    started = int(time.time())
    state = ServerState()

    def needs_key(path: str) -> bool:
        return bool(keys) and (
            path.startswith("/v1/") or (path == "/metrics" and settings.metrics_auth)
        )

    @app.on_request
    async def begin(request: Request) -> HTTPResponse | None:
        request.ctx.request_id = request.headers.get("x-request-id") or uuid4().hex
        request.ctx.started = time.perf_counter()
        request.ctx.is_stream = False
        structlog.contextvars.bind_contextvars(request_id=request.ctx.request_id)
        if state.is_draining and request.path.startswith("/v1/"):
            return error_response(
                ApiError(
                    503,
                    "The server is shutting down",
                    code="shutting_down",
                    headers={"retry-after": "5"},
                )
            )
        if needs_key(request.path) and not is_authorized(
            request.headers.get("authorization"), keys
        ):
            return error_response(
                ApiError(
                    401,
                    "Incorrect API key provided: send 'Authorization: Bearer <key>'",
                    code="invalid_api_key",
                )
            )
        return None

    @app.on_response
    async def end(request: Request, response: HTTPResponse) -> None:
        request_id = getattr(request.ctx, "request_id", None)
        if request_id:
            response.headers["x-request-id"] = request_id
        if not getattr(request.ctx, "is_stream", False):
            observe(request, response.status)

    @app.get("/health")
    async def health(_: Request) -> HTTPResponse:
        if problem:
            return json({"status": "degraded", "reason": problem}, status=503)
        return json({"status": "ok"})

    @app.get("/ready")
    async def ready(_: Request) -> HTTPResponse:
        if runtime.engine.is_alive:
            return json({"status": "ready", "model": model_id})
        return error_response(ApiError(503, "the engine is not running", code="not_ready"))

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
        return await serve_call(request, parse(request, ChatRequest))

    @app.post("/v1/completions")
    async def completions(request: Request) -> HTTPResponse | None:
        return await serve_call(request, parse(request, CompletionRequest))

    async def serve_call(
        request: Request, body: ChatRequest | CompletionRequest
    ) -> HTTPResponse | None:
        session_id = body.session_id or request.headers.get(SESSION_HEADER)
        call = Call(served, body, session_id)
        if not body.stream:
            return json(await call.response())
        frames = call.frames()
        first = await anext(frames)  # NOTE: errors before the first frame are still HTTP errors
        request.ctx.is_stream = True
        response = await request.respond(
            content_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-request-id": request.ctx.request_id},
        )
        await response.send(first)
        async for chunk in frames:
            await response.send(chunk)
        await response.eof()
        observe(request, 200)
        return None

    @app.get("/v1/sessions")
    async def list_sessions(_: Request) -> HTTPResponse:
        return json({"object": "list", "data": [s.describe() for s in sessions.list()]})

    @app.get("/v1/sessions/<session_id>")
    async def get_session(_: Request, session_id: str) -> HTTPResponse:
        session = sessions.get(session_id)
        if session is None:
            raise ApiError(404, f"No session '{session_id}'", "session_id", "session_not_found")
        return json(session.describe())

    @app.delete("/v1/sessions/<session_id>")
    async def delete_session(_: Request, session_id: str) -> HTTPResponse:
        if not sessions.delete(session_id):
            raise ApiError(404, f"No session '{session_id}'", "session_id", "session_not_found")
        return json({"id": session_id, "object": "session.deleted", "deleted": True})

    @app.exception(Exception)
    async def on_error(request: Request, exc: Exception) -> HTTPResponse:
        return error_response(to_api_error(exc))

    @app.before_server_stop
    async def drain(*_: object) -> None:
        """Let calls in flight finish (streams included) for up to drain_seconds; Sanic's own
        grace period does not keep a streaming handler going."""
        state.is_draining = True
        deadline = time.monotonic() + settings.drain_seconds
        if state.num_active:
            log.info("draining", requests=state.num_active, seconds=settings.drain_seconds)
        while state.num_active and time.monotonic() < deadline:
            # NOTE: a short tick: once shutdown begins, wake-ups from the engine thread
            # (call_soon_threadsafe) no longer reliably wake the loop, so events are picked up
            # at each tick (at 50 ms a drained stream crawled at 20 tokens a second)
            await asyncio.sleep(0.005)

    @app.after_server_stop
    async def close_runtime(*_: object) -> None:
        runtime.close()

    return app


def parse(request: Request, model: type[ChatRequest] | type[CompletionRequest]):
    try:
        body = request.json
    except BadRequest as exc:
        raise ApiError(400, "The request body is not valid JSON", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object", code="invalid_json")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise from_validation_error(exc) from exc


def to_api_error(exc: Exception) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InvalidRequestError):
        return ApiError(400, str(exc), exc.param, exc.code)
    if isinstance(exc, EngineBusyError):
        return ApiError(429, str(exc), code=exc.code, headers={"retry-after": "1"})
    if isinstance(exc, PayloadTooLarge):
        return ApiError(
            413, "The request body is larger than max_body_bytes", code="request_too_large"
        )
    if isinstance(exc, NotFound):
        return ApiError(404, "No such route", code="not_found")
    if isinstance(exc, MethodNotAllowed):
        return ApiError(405, "Method not allowed on this route", code="method_not_allowed")
    if isinstance(exc, BadRequest):
        return ApiError(400, str(exc), code="bad_request")
    log.exception("unexpected error")
    return ApiError(500, "Internal error; the server log has the details", code="internal_error")


def error_response(error: ApiError) -> HTTPResponse:
    return json(error.body(), status=error.status, headers=error.headers)


def observe(request: Request, status: int) -> None:
    route = request.route.path if request.route else "unmatched"
    metrics.REQUESTS.labels(route, str(status)).inc()
    started = getattr(request.ctx, "started", None)
    if started is not None:
        metrics.REQUEST_SECONDS.labels(route).observe(time.perf_counter() - started)


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
    if not keys:
        log.warning("no API keys configured: the server is unauthenticated", host=settings.host)
    app.run(host=settings.host, port=settings.port, single_process=True, access_log=False)


def prepare(settings: Settings) -> tuple[list[str], str | None, Runtime]:
    """Keys, what is wrong with the state directories, and the loaded runtime."""
    keys = load_api_keys(settings)
    limit = min(settings.max_best_of, settings.parallel or DEFAULT_PARALLEL)
    if settings.best_of > limit:
        raise ConfigError(
            f"best_of is {settings.best_of}, but a Conclave here holds at most {limit} "
            "candidates (max_best_of, parallel)"
        )
    problem = state_problem(settings)
    return keys, problem, Runtime(settings)  # NOTE: last: a bad key file fails before loading


def hold(error: ReameError, host: str, port: int) -> None:
    """Reame could not start: answer every request with why (503), /health included, so a
    container shows the reason in its health status instead of restarting in a loop."""
    log.error("cannot start", reason=str(error))
    failure = ApiError(503, f"Reame could not start: {error}", code=error.code)
    app = Sanic("reame_hold", configure_logging=False)
    app.config.MOTD = False
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

    @app.route("/", methods=methods, name="root")
    @app.route("/<path:path>", methods=methods)
    async def answer(request: Request, path: str = "") -> HTTPResponse:
        if request.path == "/health":
            return json({"status": "error", "reason": failure.message}, status=503)
        return error_response(failure)

    app.run(host=host, port=port, single_process=True, access_log=False)
