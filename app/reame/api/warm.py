"""`POST /v1/warm`: a document paid for before its questions come. A prompt, or messages (a
system prompt, a document, tools) as a later chat renders them before its own messages, is
computed and kept as any request's is (a resident sequence, the prefix cache's RAM and disk
tiers): no answer is written. A question that starts with it then computes only itself.

No HTTP here (the server hands in a validated body); the same places and key share as a chat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictStr, model_validator

from reame.api.chat_turn import ThinkingDefaults, template_messages
from reame.api.errors import ApiError
from reame.api.schemas import STRICT, ChatMessage, ChatRequest, PlainValue, TokenIdValue, Tool
from reame.api.served import Served
from reame.api.tool_use import ToolUse
from reame.engine.request import FinishEvent
from reame.errors import InvalidRequestError
from reame.service import Job
from reame.thinking.budget import thinking_plan
from reame.thinking.framing import template_kwargs

# NOTE: a plan's budget only caps a thought's length; what the template renders before the
# answer does not depend on max_tokens, so any bound large enough will do
_NO_BOUND = 1 << 30
_NEXT = "reameWarmNext"  # NOTE: a probe text no conversation holds: where the next message goes


class WarmRequest(BaseModel):
    """`messages` or `prompt` (a completion's prompt: text or token ids), not both."""

    model_config = STRICT
    model: str | None = Field(None, min_length=1)
    messages: Annotated[list[ChatMessage], Field(min_length=1)] | None = None
    prompt: StrictStr | Annotated[list[TokenIdValue], Field(min_length=1)] | None = None
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    chat_template_kwargs: (
        Annotated[dict[Annotated[str, Field(max_length=64)], PlainValue], Field(max_length=32)]
        | None
    ) = None

    @model_validator(mode="after")
    def _one_input(self) -> WarmRequest:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("send messages or prompt (one of them)")
        if self.prompt is not None and (
            self.tools is not None or self.chat_template_kwargs is not None
        ):
            raise ValueError("tools and chat_template_kwargs go with messages")
        return self


async def warm(served: Served, body: WarmRequest, owner: str) -> dict[str, Any]:
    """Compute the body's prompt and keep its state; what it computed and what it reused."""
    model = body.model or served.model_id
    if model not in served.model_names:
        raise ApiError(
            404,
            f"The model '{model}' does not exist; this server serves '{served.model_id}'",
            "model",
            "model_not_found",
        )
    return await warm_tokens(served, lambda: warm_prompt(served, body), owner)


async def warm_tokens(
    served: Served, prompt_of: Callable[[], tuple[list[int], tuple[int, ...]]], owner: str
) -> dict[str, Any]:
    """Compute the prompt `prompt_of` gives (its tokens and message ends, made off the event
    loop) and keep its state, in a place of the key's share."""
    served.take_places(owner, 1)
    try:
        job, prepared = await asyncio.to_thread(_prepare, served, prompt_of, owner)
        stream = served.service.astream_many([job], requests=prepared)
        finish: FinishEvent | None = None
        try:
            async for batch in stream:
                for item in batch:
                    if isinstance(item.event, FinishEvent):
                        finish = item.event
        except InvalidRequestError as exc:
            raise ApiError(400, str(exc), exc.param, exc.code) from exc
        finally:
            await stream.aclose()
    finally:
        served.give_back_places(owner, 1)
    if finish is None or not finish.reason.is_whole:
        raise served.failure(finish) if finish else ApiError(503, "the warm did not finish")
    cached = finish.num_cached_tokens
    return {
        "object": "warm",
        "model": served.model_id,
        "usage": {
            "prompt_tokens": finish.num_prompt_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def _prepare(
    served: Served, prompt_of: Callable[[], tuple[list[int], tuple[int, ...]]], owner: str
) -> tuple[Job, list]:
    """The job (off the event loop: a template over a large body, its tokens, the stored
    states read), one token asked for: the prompt's state is what is kept. Its marks cut its
    chunks where a cold request of a longer prompt cuts them (exact_reuse)."""
    service = served.service
    try:
        prompt, marks = prompt_of()
        params = service.sampling(temperature=0.0, max_tokens=1, speculation="off")
    except InvalidRequestError as exc:
        raise ApiError(400, str(exc), exc.param, exc.code) from exc
    job = Job(
        prompt,
        params,
        marks=marks,
        scope=owner if served.is_scoped_per_key else "",
        owner=owner,
    )
    return job, service.prepare([job])


def warm_prompt(served: Served, body: WarmRequest) -> tuple[list[int], tuple[int, ...]]:
    """The tokens a later request starts with, and where its messages end: a prompt as a
    completion tokenizes it; messages (and tools) as a chat renders them before its next
    message, up to that message's role header when the next is a user's (after a system
    prompt, an answer or a tool result), so the warm ends where a cold chat's chunks end (its
    first or last mark, chat_prompt.marks) and the chat that follows answers as a cold one.
    The thinking switches are those a chat of the same reasoning_effort gets."""
    service = served.service
    if body.prompt is not None:
        prompt = body.prompt
        return (list(prompt) if isinstance(prompt, list) else service.text_prompt(prompt)), ()
    assert body.messages is not None
    chat = ChatRequest(
        model=served.model_id,
        messages=body.messages,
        tools=body.tools,
        reasoning_effort=body.reasoning_effort,
    )
    messages = template_messages(chat, service)
    tools = None
    tool_use = ToolUse.of(chat, messages, service.model, service.chat.template_source)
    if tool_use is not None:
        messages, tools = tool_use.prompt(messages)
    kwargs = warm_kwargs(served.thinking, service, body)
    if messages[-1]["role"] != "user":
        probed = [*messages, {"role": "user", "content": _NEXT}]
        text = service.chat.text(probed, tools, kwargs, add_generation_prompt=False)
        if (at := text.find(_NEXT)) > 0:
            prompt = service.chat.tokenize(text[:at])
            return prompt, tuple(service.chat.marks(probed, prompt, tools, kwargs))
    text = service.chat.text(messages, tools, kwargs, add_generation_prompt=False)
    prompt = service.chat.tokenize(text)
    return prompt, tuple(service.chat.marks(messages, prompt, tools, kwargs))


def warm_kwargs(defaults: ThinkingDefaults, service: Any, body: WarmRequest) -> dict[str, Any]:
    plan = thinking_plan(
        body.reasoning_effort, None, _NO_BOUND, defaults.budget, defaults.effort_budgets or {}
    )
    return template_kwargs(
        service.chat.thinking, plan, body.reasoning_effort, body.chat_template_kwargs or {}
    )
