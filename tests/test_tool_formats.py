"""Qwen3-Coder's XML calls and LFM2's Python calls: found on the real templates, rendered
through them, and read back whole and streamed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reame.chat_template import ChatTemplate
from reame.errors import InvalidRequestError
from reame.tool_calls.family import tool_family
from reame.tool_calls.parse import parse_tool_output
from reame.tool_calls.prompt import tool_prompt
from reame.tool_calls.stream import Delta, ToolStream

TEMPLATES = Path(__file__).parent / "templates"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "metric": {"type": "boolean"},
                    "zip": {"type": "string"},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "get_time"}},
]
ARGUMENTS = {"city": "Rome", "days": 2, "metric": True, "where": {"near": [1, None]}}
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Rome?"},
    {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "call_0123456789abcdef01234567",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps(ARGUMENTS)},
            },
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_time", "arguments": "{}"},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_0123456789abcdef01234567", "content": "22C, sunny"},
    {"role": "tool", "tool_call_id": "call_1", "content": "noon"},
]


def _source(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text()


def _calls(text: str, family: str, tools: list | None = TOOLS) -> list[tuple[str, object]]:
    answer = parse_tool_output(text, family, tools)
    return [(c.name, json.loads(c.arguments)) for c in answer.calls]


# --- detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("Qwen3.5-4B", "qwen3_coder"),
        ("Qwen3-Coder", "qwen3_coder"),
        ("LFM2-8B-A1B", "lfm2"),
        ("LFM2.5-Instruct", "lfm2"),
        ("Qwen-Qwen3-0.6B", "hermes"),
        ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "generic"),
    ],
)
def test_the_real_templates_are_told_apart(name: str, family: str) -> None:
    assert tool_family(_source(name)) == family
    assert tool_family(ChatTemplate(_source(name))) == family


def test_detection_reads_what_the_template_writes_not_its_source() -> None:
    # NOTE: the markers are put together as the template runs: no source search sees them
    source = (
        "{% set t = 'tool' ~ '_call' %}{% for m in messages %}{{ m.role }}: {{ m.content }}"
        "{% for c in m.tool_calls or [] %}<{{ t }}>\n<function={{ c.function.name }}>\n"
        "{% for k, v in c.function.arguments|items %}<parameter={{ k }}>\n{{ v }}\n</parameter>\n"
        "{% endfor %}</function>\n</{{ t }}>{% endfor %}\n{% endfor %}"
    )
    assert "<tool_call>" not in source
    assert tool_family(source) == "qwen3_coder"
    # a template that writes Hermes' JSON inside <tool_call> is not taken for XML for naming
    # <function= somewhere in its text
    hermes = _source("Qwen-Qwen3-0.6B") + "{# <function=x> <parameter=y> #}"
    assert tool_family(hermes) == "hermes"


def test_a_template_that_cannot_render_the_probe_is_searched_instead() -> None:
    broken = "{{ raise_exception('no') }}<tool_call>\n<function=f>\n<parameter=a>"
    assert tool_family(broken) == "qwen3_coder"
    assert tool_family("{{ raise_exception('no') }}<|tool_call_start|>") == "lfm2"
    assert tool_family("{% if %}") == "generic"


# --- rendering -----------------------------------------------------------------------------


def _render(name: str, tool_choice: object = "auto", messages: list | None = None) -> str:
    source = _source(name)
    prompt = tool_prompt(messages or CONVERSATION, TOOLS, tool_choice, tool_family(source))
    return ChatTemplate(source, "<s>", "</s>").render(prompt.messages, tools=prompt.tools)


XML_CALL = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
    "<parameter=days>\n2\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n"
    '<parameter=where>\n{"near": [1, null]}\n</parameter>\n</function>\n</tool_call>'
)
XML_NOOP = "<tool_call>\n<function=get_time>\n</function>\n</tool_call>"


@pytest.mark.parametrize("name", ["Qwen3.5-4B", "Qwen3-Coder"])
def test_qwen_xml_templates_write_each_argument_as_json_text_or_raw(name: str) -> None:
    out = _render(name)
    assert "get_weather" in out.split("<|im_end|>")[0]  # the tools, in the system turn
    assert f"Checking.\n\n{XML_CALL}\n{XML_NOOP}<|im_end|>" in out
    assert "<tool_response>\n22C, sunny\n</tool_response>" in out
    assert "<tool_response>\nnoon\n</tool_response>" in out


@pytest.mark.parametrize("name", ["Qwen3.5-4B", "Qwen3-Coder"])
def test_a_rendered_xml_call_reads_back_as_it_was_sent(name: str) -> None:
    text = _render(name).split("Checking.")[1].split("<|im_end|>")[0]
    assert _calls(text, "qwen3_coder") == [("get_weather", ARGUMENTS), ("get_time", {})]


LFM2_CALLS = (
    '<|tool_call_start|>[get_weather(city="Rome", days=2, metric=True, '
    'where={"near": [1, None]}), get_time()]<|tool_call_end|>'
)


def test_lfm2_gets_the_functions_in_its_tool_list_and_its_calls_in_the_text() -> None:
    out = _render("LFM2-8B-A1B")
    function = json.dumps(TOOLS[0]["function"])
    assert f"Be brief.\nList of tools: <|tool_list_start|>[{function}, " in out
    assert f"<|im_start|>assistant\nChecking.{LFM2_CALLS}<|im_end|>" in out
    assert "<|im_start|>tool\n<|tool_response_start|>22C, sunny<|tool_response_end|>" in out
    assert out.endswith("<|im_start|>assistant\n")


def test_lfm25_writes_the_same_calls_without_tool_list_markers() -> None:
    out = _render("LFM2.5-Instruct")
    assert f"List of tools: [{json.dumps(TOOLS[0]['function'])}, " in out
    assert f"Checking.{LFM2_CALLS}<|im_end|>" in out
    assert "<|im_start|>tool\n22C, sunny<|im_end|>" in out


def test_a_rendered_lfm2_call_reads_back_as_it_was_sent() -> None:
    assert _calls(LFM2_CALLS, "lfm2") == [("get_weather", ARGUMENTS), ("get_time", {})]


@pytest.mark.parametrize("name", ["Qwen3.5-4B", "Qwen3-Coder", "LFM2-8B-A1B", "LFM2.5-Instruct"])
def test_tool_choice_none_gives_the_template_no_tools(name: str) -> None:
    assert "get_weather" not in _render(name, "none").split("Weather in Rome?")[0]


@pytest.mark.parametrize("name", ["Qwen3.5-4B", "LFM2-8B-A1B"])
def test_arguments_that_are_no_json_object_are_a_clear_error(name: str) -> None:
    messages = [dict(m) for m in CONVERSATION[:3]]
    call = messages[2]["tool_calls"][0]
    messages[2]["tool_calls"] = [{**call, "function": {"name": "get_weather", "arguments": "?"}}]
    with pytest.raises(InvalidRequestError, match=r"messages\[2\].*JSON object") as caught:
        _render(name, messages=messages)
    assert caught.value.param == "messages"


# --- whole answers ------------------------------------------------------------------------


def test_xml_values_are_typed_by_the_schema() -> None:
    text = (
        "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew\nYork\n"
        "</parameter>\n<parameter=zip>\n00100\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
        "<parameter=metric>\nfalse\n</parameter>\n</function>\n</tool_call>"
    )
    answer = parse_tool_output(text, "qwen3_coder", TOOLS)
    assert answer.content == "Let me check."
    assert [c.arguments for c in answer.calls] == [
        '{"city":"New\\nYork","zip":"00100","days":3,"metric":false}'
    ]
    # without the schema a value is JSON where it reads as JSON
    untyped = text.replace("00100", "true")
    assert _calls(untyped, "qwen3_coder", None)[0][1]["zip"] is True
    assert _calls(untyped, "qwen3_coder")[0][1]["zip"] == "true"


def test_an_xml_string_keeps_its_markup_and_only_the_newlines_the_template_adds() -> None:
    value = "<b>bold</b> a < b\n\n  indented"
    text = f"<tool_call><function=get_weather><parameter=city>\n{value}\n\n</parameter></function>"
    assert _calls(text, "qwen3_coder") == [("get_weather", {"city": value + "\n"})]


def test_lfm2_values_are_python_literals_or_json() -> None:
    text = (
        "Sure.<|tool_call_start|>[get_weather(city='it\\'s', days=-2, metric=False, x=None, "
        'y=[1.5, {"a": true, \'b\': (1, 2)}], z="\\u00e9\\n"), get_time()]<|tool_call_end|>'
    )
    answer = parse_tool_output(text, "lfm2")
    assert answer.content == "Sure."
    assert [(c.name, c.arguments) for c in answer.calls] == [
        (
            "get_weather",
            '{"city":"it\'s","days":-2,"metric":false,"x":null,'
            '"y":[1.5,{"a":true,"b":[1,2]}],"z":"é\\n"}',
        ),
        ("get_time", "{}"),
    ]


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>", "qwen3_coder"),
        ("<tool_call>\nnot xml\n</tool_call>", "qwen3_coder"),
        ("<tool_call>\n<function=f\nx>\n</function>", "qwen3_coder"),
        (
            "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter><parameter=a>\n2\n</parameter>"
            "</function>",
            "qwen3_coder",
        ),
        ("<tool_call>\n<function=f>\n<oops>\n</function>", "qwen3_coder"),
        ("<|tool_call_start|>[f(1)]<|tool_call_end|>", "lfm2"),
        ("<|tool_call_start|>[f(a=__import__('os').getcwd())]<|tool_call_end|>", "lfm2"),
        ("<|tool_call_start|>[f(a=b)]<|tool_call_end|>", "lfm2"),
        ("<|tool_call_start|>[f(a=1, a=2)]<|tool_call_end|>", "lfm2"),
        ("<|tool_call_start|>[f(a=b'x')]<|tool_call_end|>", "lfm2"),
        ("<|tool_call_start|>[f(a=1j)]<|tool_call_end|>", "lfm2"),
        ('<|tool_call_start|>[f(a="\\ud800")]<|tool_call_end|>', "lfm2"),
        ("<|tool_call_start|>f(a=1)<|tool_call_end|>", "lfm2"),
        ("<|tool_call_start|>[f(a='open", "lfm2"),
        ("See [the docs](https://x.y) (f(a=1))", "lfm2"),
    ],
)
def test_what_is_not_a_well_formed_call_is_content(text: str, family: str) -> None:
    answer = parse_tool_output(text, family)
    assert answer.calls == []
    assert answer.content == text.strip()


def test_a_call_after_a_malformed_one_and_a_missing_closer_still_count() -> None:
    bad = "<tool_call>\n<function=f>\n<bad/>\n</tool_call>"
    good = "<tool_call>\n<function=g>\n</function>"  # the model stopped before </tool_call>
    answer = parse_tool_output(f"{bad}\n{good}", "qwen3_coder")
    assert answer.content == bad
    assert [(c.name, c.arguments) for c in answer.calls] == [("g", "{}")]
    answer = parse_tool_output("<|tool_call_start|>[f(a=1), g(b=oops)]<|tool_call_end|>", "lfm2")
    assert [(c.name, c.arguments) for c in answer.calls] == [("f", '{"a":1}')]
    assert answer.content == ", g(b=oops)]<|tool_call_end|>"


# --- streaming -----------------------------------------------------------------------------

ANSWERS = [
    ("qwen3_coder", "Let me see.\n\n" + XML_CALL + "\n" + XML_NOOP),
    ("qwen3_coder", XML_CALL + "\nand text after"),
    ("qwen3_coder", "No call <here>, just <tool text and <tool_call."),
    ("qwen3_coder", "<tool_call>\n<fun!>\n</tool_call> then <tool_call>\n" + XML_NOOP[12:]),
    ("lfm2", "Checking." + LFM2_CALLS),
    ("lfm2", '<|tool_call_start|>[get_weather(city="a)b]c\\"", days=1)]<|tool_call_end|> ok'),
    ("lfm2", "<|tool_call_start|>nope<|tool_call_end|> and <|tool_call"),
    ("lfm2", "Markdown [link](url) stays."),
]


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def _run(family: str, pieces: list[str]) -> tuple[list[Delta], ToolStream]:
    stream = ToolStream(family, TOOLS)
    deltas: list[Delta] = []
    for piece in pieces:
        deltas += stream.feed(piece)
    return deltas + stream.finish(), stream


def _assembled(deltas: list[Delta]) -> tuple[str | None, list[tuple[str, str]]]:
    content = "".join(d for d in deltas if isinstance(d, str))
    calls: dict[int, list[str]] = {}
    for d in deltas:
        if isinstance(d, dict):
            if "id" in d:
                calls[d["index"]] = [d["function"]["name"], ""]
            else:
                calls[d["index"]][1] += d["function"]["arguments"]
    return content or None, [(name, arguments) for name, arguments in calls.values()]


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(ANSWERS), st.lists(st.integers(min_value=0, max_value=10_000), max_size=16))
def test_any_split_gives_what_the_parser_gives(answer: tuple[str, str], cuts: list[int]) -> None:
    family, text = answer
    deltas, stream = _run(family, _split(text, cuts))
    parsed = parse_tool_output(text, family, TOOLS)
    whole = (parsed.content, [(c.name, c.arguments) for c in parsed.calls])
    assert _assembled(deltas) == whole
    assert [(c.name, c.arguments) for c in stream.calls] == whole[1]


FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<function=f>",
    "</function>",
    "<parameter=a>",
    "<parameter=days>",
    "</parameter>",
    "<|tool_call_start|>",
    "<|tool_call_end|>",
    "[",
    "]",
    "(",
    ")",
    "f(",
    "a=",
    "=",
    ",",
    ", ",
    "'",
    '"',
    "\\",
    "1",
    "True",
    "null",
    "x",
    " ",
    "\n",
    "<",
    ">",
    "é",
]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["qwen3_coder", "lfm2"]),
    st.lists(st.sampled_from(FRAGMENTS), max_size=30),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_text_reads_the_same_however_it_arrives_and_never_raises(
    family: str, fragments: list[str], cuts: list[int]
) -> None:
    text = "".join(fragments)
    parse_tool_output(text, family, TOOLS)
    assert _assembled(_run(family, _split(text, cuts))[0]) == _assembled(_run(family, [text])[0])


def test_an_xml_call_opens_at_its_name_and_its_arguments_come_a_parameter_at_a_time() -> None:
    stream = ToolStream("qwen3_coder", TOOLS)
    assert stream.feed("Hello <tool") == ["Hello"]
    assert stream.feed("_call>\n<function=get_wea") == []
    opened = stream.feed("ther>\n<parameter=city>\nRo")
    assert [d["function"] for d in opened] == [{"name": "get_weather", "arguments": ""}]
    assert stream.feed("me\n</parameter>\n") == [
        {"index": 0, "function": {"arguments": '{"city":"Rome"'}}
    ]
    assert stream.feed("<parameter=days>\n4\n</parameter>\n</function>\n</tool_call>") == [
        {"index": 0, "function": {"arguments": ',"days":4'}},
        {"index": 0, "function": {"arguments": "}"}},
    ]
    assert stream.finish() == []
    assert [(c.name, c.arguments) for c in stream.calls] == [
        ("get_weather", '{"city":"Rome","days":4}')
    ]


def test_an_lfm2_call_opens_at_its_parenthesis_and_closes_at_its_own() -> None:
    stream = ToolStream("lfm2", TOOLS)
    assert stream.feed("Sure <|tool_call") == ["Sure"]
    assert stream.feed("_start|>[get_wea") == []
    opened = stream.feed('ther(city="a)')
    assert [d["function"]["name"] for d in opened] == ["get_weather"]
    assert stream.feed('", days=2)') == [
        {"index": 0, "function": {"arguments": '{"city":"a)","days":2}'}}
    ]
    assert stream.feed(", get_time()]<|tool_call_end|>")[0]["index"] == 1
    assert stream.finish() == []
    assert [c.name for c in stream.calls] == ["get_weather", "get_time"]
