from __future__ import annotations

import json

import pytest

from reame.errors import InvalidRequestError
from reame.tool_calls.prompt import check_tool_conversation, generic_instructions, tool_prompt

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_time"}},
]
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
}


def test_hermes_messages_get_their_arguments_as_objects_and_tool_names() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    prompt = tool_prompt(messages, TOOLS, "auto", "hermes")
    assert prompt.tools == TOOLS
    assistant, tool = prompt.messages[1], prompt.messages[2]
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": {"city": "Rome"},
    }
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny",
        "name": "get_weather",
    }


def test_an_assistant_message_without_calls_has_no_tool_calls_key() -> None:
    messages = [{"role": "assistant", "content": "hello", "tool_calls": None}]
    assert "tool_calls" not in tool_prompt(messages, TOOLS, "auto", "llama3").messages[0]


def test_the_callers_messages_are_left_as_they_were() -> None:
    messages = [{"role": "assistant", "content": None, "tool_calls": [CALL]}]
    before = json.dumps(messages)
    tool_prompt(messages, TOOLS, "auto", "hermes")
    tool_prompt(messages, TOOLS, "auto", "generic")
    assert json.dumps(messages) == before


def test_generic_adds_to_an_existing_system_message() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    prompt = tool_prompt(messages, TOOLS, "auto", "generic")
    assert prompt.tools is None
    system = prompt.messages[0]["content"]
    assert system == "Be brief.\n\n" + generic_instructions(TOOLS, "auto", "auto")
    assert '"name": "get_time"' in system
    assert '{"tool_calls":[{"name":"tool_name","arguments":{"arg1":"some_value"}}]}' in system
    assert '{"response":"Hello!"}' in system


def test_generic_creates_a_system_message_when_there_is_none() -> None:
    prompt = tool_prompt([{"role": "user", "content": "hi"}], TOOLS, "required", "generic")
    assert prompt.messages[0]["role"] == "system"
    assert prompt.messages[0]["content"].startswith("Respond in JSON format with `tool_calls`")
    assert "response" not in prompt.messages[0]["content"]


def test_generic_names_the_function_a_named_choice_asks_for() -> None:
    choice = {"type": "function", "function": {"name": "get_time"}}
    prompt = tool_prompt([{"role": "user", "content": "hi"}], TOOLS, choice, "generic")
    assert "a request to call `get_time`" in prompt.messages[0]["content"]


def test_generic_writes_past_calls_replies_and_results_in_the_answer_format() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Weather and time?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "rainy"},
    ]
    out = tool_prompt(messages, TOOLS, "auto", "generic").messages[1:]
    assert out[1] == {"role": "assistant", "content": '{"response":"Hello."}'}
    call = '{"name":"get_weather","arguments":{"city":"Rome"}}'
    assert out[3] == {"role": "assistant", "content": '{"tool_calls":[' + call + "," + call + "]}"}
    results = out[4]["content"].split("\n")
    assert out[4]["role"] == "user" and len(out) == 5
    assert json.loads(results[1]) == {
        "tool_response": {"tool": "get_weather", "content": "rainy", "tool_call_id": "call_2"}
    }


def test_generic_with_tool_choice_none_adds_no_instructions_and_keeps_plain_replies() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]
    out = tool_prompt(messages, TOOLS, "none", "generic").messages
    assert out == messages


def _tool(name: str) -> dict:
    return {"type": "function", "function": {"name": name}}


@pytest.mark.parametrize(
    ("tools", "choice", "param", "says"),
    [
        (
            TOOLS,
            {"type": "function", "function": {"name": "nope"}},
            "tool_choice",
            "no tool is named",
        ),
        (None, "required", "tool_choice", "has no tools"),
        ([], {"type": "function", "function": {"name": "x"}}, "tool_choice", "has no tools"),
        (TOOLS, "sometimes", "tool_choice", "expected"),
        ([_tool("a"), _tool("a")], "auto", "tools", "defined twice"),
        ([_tool("has space")], "auto", "tools", "letters, digits"),
        ([_tool("x" * 65)], "auto", "tools", "1 to 64"),
        ([{"type": "code_interpreter"}], "auto", "tools", "type 'function'"),
    ],
)
def test_bad_tools_and_choices_are_clear_errors(
    tools: list | None, choice: object, param: str, says: str
) -> None:
    with pytest.raises(InvalidRequestError, match=says) as caught:
        check_tool_conversation([{"role": "user", "content": "hi"}], tools, choice)
    assert caught.value.param == param


def test_a_tool_message_must_answer_an_earlier_call() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_1", "content": "early"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
    ]
    with pytest.raises(InvalidRequestError, match=r"messages\[1\].*call_1") as caught:
        check_tool_conversation(messages, TOOLS, "auto")
    assert caught.value.param == "messages"
    check_tool_conversation([messages[0], messages[2], messages[1]], TOOLS, "auto")


def test_a_good_request_passes() -> None:
    for choice in (
        None,
        "none",
        "auto",
        "required",
        {"type": "function", "function": {"name": "get_time"}},
    ):
        check_tool_conversation([{"role": "user", "content": "hi"}], TOOLS, choice)
    check_tool_conversation([{"role": "user", "content": "hi"}], None, None)
