"""The routes of Anthropic's Messages API: `POST /v1/messages` (a message, streamed or not; with
max_tokens 0 the prompt computed and kept, nothing written) and `/v1/messages/count_tokens`.
Each is served as the chat it means (messages_convert.py), through the same Call.

NOTE: the api/server*.py modules are the only ones that use sanic (imported once, in
sanic_kit.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from pydantic import ValidationError

from reame.api import messages_convert as anthropic
from reame.api.calls import Call
from reame.api.errors import from_validation_error
from reame.api.messages_schemas import CountTokensRequest, MessagesRequest
from reame.api.messages_stream import MessageStream
from reame.api.sanic_kit import HTTPResponse, Request, Sanic, json
from reame.api.schemas import ChatRequest
from reame.api.served import Served
from reame.api.server_exchange import StreamLimits, parse, send_stream
from reame.api.warm import warm_tokens

if TYPE_CHECKING:
    from reame.api.server_app import ServerState


def add_messages_routes(app: Sanic, served: Served, state: ServerState, limits: StreamLimits):
    @app.post("/v1/messages")
    async def messages(request: Request) -> HTTPResponse | None:
        served.check_key_room(request.ctx.owner)
        body = parse(request, MessagesRequest)
        call = Call(served, messages_call(body), None, request.ctx.owner)
        state.num_active += 1  # NOTE: counted until the last byte, so SIGTERM drains it
        try:
            if body.max_tokens == 0:
                stream = await prompt_only(call, request.ctx.owner)
                if not body.stream:
                    return json(stream.message())
                await send_stream(request, _one(stream.start() + stream.finish(None)), {}, limits)
                return None
            await call.start()
            headers = call.headers()
            if not body.stream:
                chat = await call.response()
                answer = anthropic.message(chat, call.rid, _stop_sequence(call))
                return json(answer, headers=headers)
            await send_stream(request, message_frames(call), headers, limits)
            return None
        finally:
            state.num_active -= 1
            await call.close()

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> HTTPResponse:
        served.check_key_room(request.ctx.owner)
        body = parse(request, CountTokensRequest)
        call = Call(served, messages_call(body), None, request.ctx.owner)
        async with served.place(request.ctx.owner):
            prompt, _ = await asyncio.to_thread(call.first_prompt)
        return json({"input_tokens": len(prompt)})


def messages_call(body: MessagesRequest | CountTokensRequest) -> ChatRequest:
    """The chat a Messages body means; a body it cannot mean is a 400."""
    try:
        return ChatRequest.model_validate(anthropic.chat_body(body, body.model))
    except ValidationError as exc:
        raise from_validation_error(exc) from exc


async def prompt_only(call: Call, owner: str) -> MessageStream:
    """max_tokens 0 (Anthropic's way to fill its prompt cache): the prompt computed and kept
    as /v1/warm keeps it; the message holds nothing."""
    warmed = await warm_tokens(call.served, call.first_prompt, owner)
    totals = warmed["usage"] | {"completion_tokens": 0}
    stream = MessageStream(call.rid, call.served.model_id, totals["prompt_tokens"])
    stream.feed([{"choices": [{"delta": {}, "finish_reason": "length"}], "usage": totals}])
    return stream


async def message_frames(call: Call) -> AsyncIterator[str]:
    stream = MessageStream(call.rid, call.served.model_id, len(call.jobs[0].prompt))
    yield stream.start()
    async for chunks in call.chunks():
        if frames := stream.feed(chunks):
            yield frames
    yield stream.finish(_stop_sequence(call))


def _stop_sequence(call: Call) -> str | None:
    finish = call.choices[0].finish
    return finish.stop_sequence if finish is not None else None


async def _one(text: str) -> AsyncIterator[str]:
    yield text
