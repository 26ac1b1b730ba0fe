"""The Responses API over the chat route, without a model: input items as chat messages, a body
as the chat it means, a chat answer as output items, and a streamed answer as the typed events
the `openai` SDK's stream accumulator takes whole."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.lib.streaming.responses._responses import ResponseStreamState
from pydantic import TypeAdapter, ValidationError

from reame.api import responses_convert as convert
from reame.api.errors import ApiError
from reame.api.responses_schemas import ResponsesRequest
from reame.api.responses_stream import ResponseStream

STREAM_EVENT = TypeAdapter(openai.types.responses.ResponseStreamEvent)
IMAGE = {"type": "input_image", "image_url": "x"}
RID = "resp_" + "a" * 24 + "b" * 24


def body(**fields: Any) -> ResponsesRequest:
    return ResponsesRequest.model_validate({"model": "m"} | fields)


def test_a_thought_an_answer_and_its_calls_are_one_assistant_message() -> None:
    def text(kind: str, said: str) -> dict[str, str]:
        return {"type": kind, "text": said}

    def call(call_id: str, city: str) -> dict[str, str]:
        arguments = json.dumps({"city": city})
        return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": arguments}

    items = [
        {
            "role": "user",
            "content": [text("input_text", "Weather "), text("input_text", "in Turin?")],
        },
        {"type": "reasoning", "summary": [], "content": [text("reasoning_text", "hm")]},
        {"type": "message", "role": "assistant", "content": [text("output_text", "Let me see.")]},
        call("c1", "Turin"),
        call("c2", "Milan"),
        {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
        {"type": "function_call_output", "call_id": "c2", "output": [text("input_text", "20 C")]},
        {"role": "developer", "content": "Answer in a word."},
    ]
    messages = convert.input_messages(body(input=items))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "developer"]
    assert messages[0]["content"] == "Weather in Turin?"
    said = messages[1]
    assert said["content"] == "Let me see." and said["reasoning_content"] == "hm"
    assert [c["id"] for c in said["tool_calls"]] == ["c1", "c2"]
    assert messages[3] == {"role": "tool", "tool_call_id": "c2", "content": "20 C"}


def test_calls_after_a_tool_output_open_a_new_assistant_message() -> None:
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c", "output": "x"}
    messages = convert.input_messages(body(input=[call, output, {**call, "call_id": "d"}]))
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant"]


def test_the_body_maps_onto_the_chat_fields() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    asked = body(
        instructions="Be brief.",
        input="Hi",
        tools=[{"type": "function", "name": "f", "parameters": schema, "strict": True}],
        tool_choice={"type": "function", "name": "f"},
        parallel_tool_calls=False,
        text={"format": {"type": "json_schema", "name": "out", "schema": schema}},
        reasoning={"effort": "xhigh"},
        max_output_tokens=9,
        temperature=0.5,
        stream=True,
    )
    earlier = [{"role": "user", "content": "Before"}, {"role": "assistant", "content": "Ok"}]
    chat = convert.chat_body(asked, earlier, convert.input_messages(asked))
    assert [m["content"] for m in chat["messages"]] == ["Be brief.", "Before", "Ok", "Hi"]
    assert chat["tools"] == [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert chat["parallel_tool_calls"] is False and chat["reasoning_effort"] == "high"
    assert chat["response_format"]["json_schema"] == {"name": "out", "schema": schema}
    assert (chat["max_tokens"], chat["temperature"], chat["stream"]) == (9, 0.5, True)
    json_object = body(input="Hi", text={"format": {"type": "json_object"}})
    plain = convert.chat_body(json_object, [], convert.input_messages(json_object))
    assert plain["response_format"] == {"type": "json_object"} and "tools" not in plain


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input.0.content.0",
        ),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools.0.type"),
        ({"input": "x", "conversation": "conv_1"}, "conversation"),
        ({"input": ""}, "input"),
    ],
)
def test_what_is_not_served_is_a_400_naming_its_field(fields: dict, param: str) -> None:
    asked = body(**fields)
    with pytest.raises(ApiError) as refused:
        convert.chat_body(asked, [], convert.input_messages(asked))
    assert refused.value.status == 400 and refused.value.param == param


def test_an_answer_as_output_items_and_a_response() -> None:
    said = {
        "role": "assistant",
        "content": "Calling.",
        "reasoning_content": "think",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    output = convert.output_items(said, RID)
    assert [i["type"] for i in output] == ["reasoning", "message", "function_call"]
    assert output[2]["call_id"] == "call_1" and output[1]["content"][0]["text"] == "Calling."
    totals = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 7},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    made = convert.response(
        body(input="x", max_output_tokens=5), RID, 1, "m", output, totals, "length"
    )
    assert made["status"] == "incomplete"
    assert made["incomplete_details"] == {"reason": "max_output_tokens"}
    usage = made["usage"]
    assert usage["input_tokens_details"]["cached_tokens"] == 7 and usage["total_tokens"] == 15
    parsed = openai.types.responses.Response.model_validate(made)
    assert parsed.output_text == "Calling."


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict | None = None
) -> dict:
    out: dict[str, Any] = {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
    if usage is not None:
        out = {"choices": [], "usage": usage}
    return out


def events_of(frames: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in frames.splitlines() if line.startswith("data: ")]


def test_a_stream_is_accumulated_whole_by_the_sdk() -> None:
    asked = body(input="x")
    stream = ResponseStream(RID, lambda *a: convert.response(asked, RID, 1, "m", *a))
    frames = stream.start()
    call = {
        "index": 0,
        "id": "call_9",
        "type": "function",
        "function": {"name": "f", "arguments": '{"a":'},
    }
    more = {"index": 0, "function": {"arguments": "1}"}}
    frames += stream.feed([chunk({"reasoning_content": "th"}), chunk({"reasoning_content": "ink"})])
    frames += stream.feed([chunk({"content": "Hel"}), chunk({"content": "lo"})])
    frames += stream.feed(
        [chunk({"tool_calls": [call]}), chunk({"tool_calls": [more]}, "tool_calls")]
    )
    frames += stream.feed([chunk(usage={"prompt_tokens": 3, "completion_tokens": 4})])
    last, response = stream.finish()
    frames += last
    events = events_of(frames)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    state = ResponseStreamState(input_tools=openai.omit, text_format=openai.omit)
    for event in events:
        state.handle_event(STREAM_EVENT.validate_python(event))
    assert response is not None and events[-1]["type"] == "response.completed"
    assert [i["type"] for i in response["output"]] == ["reasoning", "message", "function_call"]
    assert response["output"][2]["arguments"] == '{"a":1}'
    whole = {"name": "f", "arguments": '{"a":1}'}
    assert stream.said() == {
        "role": "assistant",
        "content": "Hello",
        "reasoning_content": "think",
        "tool_calls": [{"id": "call_9", "type": "function", "function": whole}],
    }


def test_a_failed_stream_ends_with_its_error() -> None:
    asked = body(input="x")
    stream = ResponseStream(RID, lambda *a: convert.response(asked, RID, 1, "m", *a))
    frames = stream.start() + stream.feed([chunk({"content": "He"})])
    frames += stream.feed([{"error": {"message": "boom", "type": "server_error"}}])
    assert stream.finish() == ("", None)
    kinds = [e["type"] for e in events_of(frames)]
    assert kinds[-2:] == ["error", "response.failed"]


def test_an_item_that_is_no_object_is_refused_as_invalid() -> None:
    """A 500 before (the item's type was read off a list): schemathesis found it."""
    for item in ([{"role": "user"}], "text", 3, None):
        with pytest.raises(ValidationError):
            ResponsesRequest.model_validate({"model": "m", "input": [item]})
