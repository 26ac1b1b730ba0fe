from __future__ import annotations

import re

import pytest

from reame.tool_calls.parse import parse_tool_output

WEATHER = '{"name":"get_weather","arguments":{"city":"Rome"}}'


def _calls(text: str, family: str) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for c in parse_tool_output(text, family).calls]


def test_hermes_calls_and_the_text_before_them() -> None:
    text = f"Checking.\n<tool_call>\n{WEATHER}\n</tool_call>\n<tool_call>\n{WEATHER}\n</tool_call>"
    answer = parse_tool_output(text, "hermes")
    assert answer.content == "Checking."
    assert [(c.name, c.arguments) for c in answer.calls] == [("get_weather", '{"city":"Rome"}')] * 2
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", c.id) for c in answer.calls)
    assert len({c.id for c in answer.calls}) == 2


def test_arguments_are_compact_whatever_the_spacing() -> None:
    text = '<tool_call>\n{"name": "f", "arguments": {"a": [1, 2], "b": "x  y"}}\n</tool_call>'
    assert _calls(text, "hermes") == [("f", '{"a":[1,2],"b":"x  y"}')]


def test_llama3_json_calls_with_or_without_python_tag() -> None:
    assert _calls('{"name": "f", "parameters": {"x": 1}}', "llama3") == [("f", '{"x":1}')]
    assert _calls('<|python_tag|>{"name":"f","parameters":{}}', "llama3") == [("f", "{}")]


def test_mistral_calls_in_a_list() -> None:
    text = (
        '[TOOL_CALLS][{"name":"f","arguments":{},"id":"abcdefghi"},'
        '{"name":"g","arguments":{"a":1}}]'
    )
    assert _calls(text, "mistral") == [("f", "{}"), ("g", '{"a":1}')]


@pytest.mark.parametrize(
    "text",
    [
        '{"tool_calls":[{"name":"f","arguments":{"a":"b"}}]}',
        '{"tool_call":{"name":"f","arguments":{"a":"b"}}}',
        ' { "tool_calls" : [ { "name" : "f", "arguments" : { "a" : "b" } } ] } ',
    ],
)
def test_generic_calls(text: str) -> None:
    answer = parse_tool_output(text, "generic")
    assert answer.content is None
    assert [(c.name, c.arguments) for c in answer.calls] == [("f", '{"a":"b"}')]


def test_generic_response_is_content() -> None:
    answer = parse_tool_output('{"response":"Hello \\"you\\" \\u00e9"}', "generic")
    assert answer.content == 'Hello "you" é' and answer.calls == []


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("Just words.", "hermes"),
        ("<tool_call>\nnot json\n</tool_call>", "hermes"),
        ('<tool_call>\n{"name":"f","arguments":5}\n</tool_call>', "hermes"),
        ('<tool_call>\n{"name":"f","arguments":{"a":}}\n</tool_call>', "hermes"),
        ('<tool_call>\n{"arguments":{}}\n</tool_call>', "hermes"),
        ('<tool_call>\n{"name":"f","arguments":{"a":1', "hermes"),
        ("[TOOL_CALLS] sorry", "mistral"),
        ('Use {braces} and {"name": oops', "llama3"),
        ('{"tool_calls":[{"name":"f"', "generic"),
        ("Plain text, no JSON.", "generic"),
        ("", "generic"),
    ],
)
def test_what_is_not_a_well_formed_call_is_content(text: str, family: str) -> None:
    answer = parse_tool_output(text, family)
    assert answer.calls == []
    assert answer.content == (text.strip() or None)


def test_text_around_a_malformed_call_and_a_good_one() -> None:
    text = f"<tool_call>\n{{bad}}\n</tool_call>\n<tool_call>\n{WEATHER}\n</tool_call>"
    answer = parse_tool_output(text, "hermes")
    assert answer.content == "<tool_call>\n{bad}\n</tool_call>"
    assert len(answer.calls) == 1
