"""The routes of OpenAI's Responses API: `POST /v1/responses` (streamed or not, chained by
`previous_response_id`), `GET` and `DELETE /v1/responses/{id}`. Each call is served as the chat
it means (responses_convert.py) through the same Call. A stored response keeps its conversation
on disk (responses_store.py) and its chain's computed state as a session, so a chained call
computes only its new input, even with the prefix cache off.

NOTE: the api/server*.py modules are the only ones that use sanic (imported once, in
sanic_kit.py).
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from reame.api import responses_convert as convert
from reame.api.calls import Call
from reame.api.errors import ApiError, from_validation_error
from reame.api.responses_schemas import ResponsesRequest
from reame.api.responses_stream import ResponseStream
from reame.api.sanic_kit import HTTPResponse, Request, Sanic, json
from reame.api.schemas import ChatRequest
from reame.api.served import Served
from reame.api.server_exchange import StreamLimits, parse, send_stream
from reame.responses_store import ResponseStore, Stored
from reame.route_key import ROUTE_HEADER, first_input, responses_chain

if TYPE_CHECKING:
    from reame.api.server_app import ServerState

_CHAIN_DIGITS = 24
_SAID_FIELDS = ("role", "content", "reasoning_content", "tool_calls")


def add_responses_routes(
    app: Sanic, served: Served, state: ServerState, limits: StreamLimits, store: ResponseStore
) -> None:
    @app.post("/v1/responses")
    async def create(request: Request) -> HTTPResponse | None:
        owner = request.ctx.owner
        served.check_key_room(owner)
        body = parse(request, ResponsesRequest)
        previous = None
        if body.previous_response_id is not None:
            previous = await asyncio.to_thread(store.get, body.previous_response_id, owner)
            if previous is None:
                raise _not_found(body.previous_response_id, "previous_response_id")
        new = convert.input_messages(body)
        conversation = previous.conversation if previous is not None else []
        chat = _chat(convert.chat_body(body, conversation, new))
        if previous is not None:
            chain = previous.response_id.removeprefix("resp_")[:_CHAIN_DIGITS]
        else:
            first = first_input(request.json.get("input"))
            chain = responses_chain(body.model, body.instructions, first)
        response_id = f"resp_{chain}{secrets.token_hex(12)}"
        root = previous.chain if previous is not None else response_id
        keep = body.store is not False
        # NOTE: the chain's state is a session of the key: bounded, evicted and expired as one
        call = Call(served, chat, f"responses-{root}" if keep else None, owner)
        describe = functools.partial(
            convert.response, body, response_id, int(time.time()), served.model_id
        )

        async def save(said: dict[str, Any], response: dict[str, Any]) -> None:
            if not keep:
                return
            message = {k: said[k] for k in _SAID_FIELDS if said.get(k) is not None}
            stored = Stored(response_id, root, conversation + new + [message], response)
            await asyncio.to_thread(store.put, stored, owner)

        headers = {ROUTE_HEADER: "r-" + chain}
        state.num_active += 1  # NOTE: counted until the last byte, so SIGTERM drains it
        try:
            await call.start()
            headers |= call.headers()
            if not body.stream:
                answer = await call.response()
                choice = answer["choices"][0]
                output = convert.output_items(choice["message"], response_id)
                response = describe(output, answer["usage"], choice["finish_reason"])
                await save(choice["message"], response)
                return json(response, headers=headers)
            stream = ResponseStream(response_id, describe)
            await send_stream(request, _frames(call, stream, save), headers, limits)
            return None
        finally:
            state.num_active -= 1
            await call.close()

    @app.get("/v1/responses/<response_id>")
    async def get(request: Request, response_id: str) -> HTTPResponse:
        stored = await asyncio.to_thread(store.get, response_id, request.ctx.owner)
        if stored is None:
            raise _not_found(response_id, "response_id")
        return json(stored.response)

    @app.delete("/v1/responses/<response_id>")
    async def delete(request: Request, response_id: str) -> HTTPResponse:
        if not await asyncio.to_thread(store.delete, response_id, request.ctx.owner):
            raise _not_found(response_id, "response_id")
        return json({"id": response_id, "object": "response", "deleted": True})


async def _frames(call: Call, stream: ResponseStream, save: Any) -> AsyncIterator[str]:
    yield stream.start()
    async for chunks in call.chunks():
        if frames := stream.feed(chunks):
            yield frames
    last, response = stream.finish()
    if response is not None:  # NOTE: stored before its last event, so a chained call finds it
        await save(stream.said(), response)
    if last:
        yield last


def _chat(body: dict[str, Any]) -> ChatRequest:
    """The chat a Responses body means; a body it cannot mean is a 400."""
    try:
        return ChatRequest.model_validate(body)
    except ValidationError as exc:
        raise from_validation_error(exc) from exc


def _not_found(response_id: str, param: str) -> ApiError:
    return ApiError(404, f"No response '{response_id}'", param, "response_not_found")
