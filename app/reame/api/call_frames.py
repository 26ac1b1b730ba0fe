"""The chunks of a streamed call, one hand-over of engine events at a time: a delta a choice
for its tokens (one write, however many tokens), its tool calls as they are read, then its
finish (or the error that ended it). Call.chunks (calls.py) adds the rest of the stream around
them; Call.frames frames them as OpenAI does, the Messages API translates them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from reame.api import openai_format as fmt
from reame.api.tool_use import delta_of
from reame.engine.request import FinishEvent, TokenEvent

if TYPE_CHECKING:
    from reame.api.calls import Call


def batch_chunks(
    call: Call, batch: list[tuple[fmt.Choice, TokenEvent | FinishEvent]]
) -> Iterator[dict]:
    """One delta a choice for the tokens of a hand-over (one write, however many tokens),
    then its finish."""
    tokens: dict[int, list[TokenEvent]] = {}
    for choice, event in batch:
        if isinstance(event, TokenEvent):
            tokens.setdefault(choice.index, []).append(event)
            continue
        yield from _token_chunks(call, choice.index, tokens.pop(choice.index, []))
        if not event.reason.is_whole:
            yield call.served.failure(event).body()
        elif choice.index in call.tool_streams:
            if event.reasoning:
                yield _delta(call, choice.index, "", None, [], event.reasoning)
            yield from _tool_finish(call, choice.index, event)
        else:
            finish = fmt.finish_reason(event)
            yield _delta(call, choice.index, event.text, finish, [], event.reasoning)
    for index, events in tokens.items():
        yield from _token_chunks(call, index, events)


def _token_chunks(call: Call, index: int, events: list[TokenEvent]) -> Iterator[dict]:
    tool_use = call.tool_use
    reasoning = "".join(e.reasoning for e in events)
    if tool_use is not None and tool_use.is_on:
        if reasoning:
            yield _delta(call, index, "", None, [], reasoning)
        stream = call.tool_streams.setdefault(index, tool_use.stream())
        text = "".join(call.answer_text(e) for e in events)
        yield from _tool_chunks(call, index, stream.feed(text))
        return
    text = "".join(e.text for e in events)
    if text or reasoning or (call.with_logprobs and events):
        yield _delta(call, index, text, None, events, reasoning)


def _tool_chunks(call: Call, index: int, pieces: list) -> Iterator[dict]:
    for piece in pieces:
        chunk = fmt.chat_chunk(call.rid, call.created, call.served.model_id, index, delta_of(piece))
        yield chunk


def _tool_finish(call: Call, index: int, event: FinishEvent) -> Iterator[dict]:
    stream = call.tool_streams[index]
    yield from _tool_chunks(call, index, stream.feed(event.text) + stream.finish())
    finish = fmt.finish_reason(event)
    if stream.calls and finish != "length":  # NOTE: cut short, the last call is not whole
        finish = "tool_calls"
    yield _delta(call, index, "", finish, [])


def _delta(
    call: Call,
    index: int,
    text: str,
    finish: str | None,
    events: list[TokenEvent],
    reasoning: str = "",
) -> dict:
    model = call.served.model_id
    if call.is_chat:
        lp = fmt.chat_logprobs(events, call.piece) if call.with_logprobs and events else None
        if call.thought is not None:
            choice = call.choices[index]
            delta = fmt.thought_delta(choice, reasoning, text, call.inline_thought)
            if not delta and not finish:
                delta = {"content": ""}
            return fmt.chat_chunk(call.rid, call.created, model, index, delta, finish, lp)
        delta = {"content": text} if text or not finish else {}
        return fmt.chat_chunk(call.rid, call.created, model, index, delta, finish, lp)
    lp = fmt.completion_logprobs(events, call.piece) if call.with_logprobs and events else None
    return fmt.completion_chunk(call.rid, call.created, model, index, text, finish, lp)
