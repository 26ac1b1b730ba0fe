"""The Messages API's translation, model-free: a Messages body as the chat body it means, a
chat answer as a Message, and chat chunks as Anthropic's stream of events."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from reame.api import messages_convert as convert
from reame.api.errors import ApiError
from reame.api.messages_schemas import MessagesRequest
from reame.api.messages_stream import MessageStream
from reame.api.schemas import ChatRequest

CONVERSATION = {
    "model": "m",
    "max_tokens": 10,
    "system": [{"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Call it.", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Turin"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_1",
                    "content": [{"type": "text", "text": "18 C"}],
                },
                {"type": "text", "text": "Thanks. And tomorrow?"},
            ],
        },
    ],
    "tools": [{"name": "weather", "description": "now", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "thinking": {"type": "enabled", "budget_tokens": 5},
    "stop_sequences": ["\n\n"],
    "temperature": 0.5,
}


def test_a_conversation_becomes_the_chat_it_means() -> None:
    chat = convert.chat_body(MessagesRequest.model_validate(CONVERSATION), "m")
    assert chat["messages"] == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "reasoning_content": "Call it.",
            "tool_calls": [
                {
                    "id": "tu_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": json.dumps({"city": "Turin"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "tu_1", "content": "18 C"},
        {"role": "user", "content": "Thanks. And tomorrow?"},
    ]
    assert chat["tools"][0]["function"] == {
        "name": "weather",
        "description": "now",
        "parameters": {"type": "object"},
    }
    assert chat["tool_choice"] == "required" and chat["parallel_tool_calls"] is False
    assert chat["reasoning_budget"] == 5 and chat["stop"] == ["\n\n"]
    assert chat["temperature"] == 0.5 and chat["max_tokens"] == 10
    ChatRequest.model_validate(chat)  # the chat route takes it as it is


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "none"}, "none"),
        (
            {"type": "tool", "name": "weather"},
            {"type": "function", "function": {"name": "weather"}},
        ),
    ],
)
def test_tool_choices(choice: dict, expected: object) -> None:
    body = MessagesRequest.model_validate({**CONVERSATION, "tool_choice": choice})
    assert convert.chat_body(body, "m")["tool_choice"] == expected


def test_thinking_off_is_effort_none() -> None:
    body = MessagesRequest.model_validate({**CONVERSATION, "thinking": {"type": "disabled"}})
    chat = convert.chat_body(body, "m")
    assert chat["reasoning_effort"] == "none" and "reasoning_budget" not in chat


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}},
        {"type": "document", "source": {"type": "url", "url": "http://x"}},
        {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
    ],
)
def test_what_cannot_be_served_is_a_400_naming_where(block: dict) -> None:
    body = MessagesRequest.model_validate(
        {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [block]}]}
    )
    with pytest.raises(ApiError) as refused:
        convert.chat_body(body, "m")
    assert refused.value.status == 400 and refused.value.param == "messages.0.content"


def test_a_text_document_is_text() -> None:
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "D"},
    }
    body = MessagesRequest.model_validate(
        {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [document]}]}
    )
    assert convert.chat_body(body, "m")["messages"] == [{"role": "user", "content": "D"}]


def test_fields_no_specification_defines_are_refused() -> None:
    with pytest.raises(ValidationError):
        MessagesRequest.model_validate({**CONVERSATION, "presence_penalty": 1})


def test_a_chat_answer_becomes_a_message() -> None:
    chat = {
        "model": "m",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "content": "Looking.",
                    "reasoning_content": "Hm.",
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "f", "arguments": '{"a": 1}'}}
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 30,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 20},
        },
    }
    message = convert.message(chat, "chatcmpl-xyz", None)
    assert message["id"] == "msg_xyz" and message["stop_reason"] == "tool_use"
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]
    assert message["content"][2]["input"] == {"a": 1}
    assert message["usage"] == {
        "input_tokens": 10,
        "output_tokens": 7,
        "cache_read_input_tokens": 20,
        "cache_creation_input_tokens": 0,
    }
    assert convert.stop_reason("stop", "END") == "stop_sequence"
    assert convert.stop_reason("stop", None) == "end_turn"
    assert convert.stop_reason("length", None) == "max_tokens"


def events(frames: str) -> list[dict]:
    return [json.loads(line[6:]) for line in frames.splitlines() if line.startswith("data: ")]


def test_chunks_become_blocks_each_opened_and_closed_in_order() -> None:
    stream = MessageStream("chatcmpl-1", "m", 12)
    frames = (
        stream.start()
        + stream.feed(
            [
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
                {"choices": [{"index": 0, "delta": {"reasoning_content": "hm"}}]},
                {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
                {"choices": [{"index": 0, "delta": {"content": " there"}}]},
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 0,
                                        "id": "c1",
                                        "function": {"name": "f", "arguments": '{"a"'},
                                    }
                                ]
                            },
                        }
                    ]
                },
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]
                            },
                        }
                    ]
                },
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": 1,
                                        "id": "c2",
                                        "function": {"name": "f", "arguments": "{}"},
                                    }
                                ]
                            },
                        }
                    ]
                },
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5}},
            ]
        )
        + stream.finish(None)
    )
    got = events(frames)
    kinds = [
        (e["type"], e.get("index"), (e.get("delta") or e.get("content_block") or {}).get("type"))
        for e in got
    ]
    assert kinds == [
        ("message_start", None, None),
        ("content_block_start", 0, "thinking"),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "signature_delta"),
        ("content_block_stop", 0, None),
        ("content_block_start", 1, "text"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_stop", 1, None),
        ("content_block_start", 2, "tool_use"),
        ("content_block_delta", 2, "input_json_delta"),
        ("content_block_delta", 2, "input_json_delta"),
        ("content_block_stop", 2, None),
        ("content_block_start", 3, "tool_use"),
        ("content_block_delta", 3, "input_json_delta"),
        ("content_block_stop", 3, None),
        ("message_delta", None, None),
        ("message_stop", None, None),
    ]
    assert got[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert got[-2]["usage"]["output_tokens"] == 5


def test_an_error_after_the_start_is_an_error_event_and_the_end() -> None:
    stream = MessageStream("chatcmpl-1", "m", 3)
    frames = stream.start() + stream.feed(
        [{"error": {"message": "busy", "type": "rate_limit_error", "code": "server_busy"}}]
    )
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "busy"}}
    assert events(frames)[-1] == error and "event: error\n" in frames
    assert stream.finish(None) == ""


def test_a_last_assistant_turn_is_continued_unless_it_called_tools() -> None:
    prefill = {"role": "assistant", "content": "The answer is"}
    body = MessagesRequest.model_validate(
        {"model": "m", "max_tokens": 4, "messages": [CONVERSATION["messages"][0], prefill]}
    )
    chat = convert.chat_body(body, "m")
    assert chat["continue_final_message"] is True
    assert ChatRequest.model_validate(chat).continue_final_message
    called = MessagesRequest.model_validate(
        {**CONVERSATION, "messages": CONVERSATION["messages"][:2]}
    )
    with pytest.raises(ApiError) as refused:
        convert.chat_body(called, "m")
    assert refused.value.status == 400 and refused.value.param == "messages.1.content"


def test_a_chat_continues_only_an_assistants_last_message() -> None:
    user = [{"role": "user", "content": "Hi"}]
    with pytest.raises(ValidationError):
        ChatRequest.model_validate({"model": "m", "messages": user, "continue_final_message": True})
