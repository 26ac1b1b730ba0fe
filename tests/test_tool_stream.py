from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reame.tool_calls.parse import parse_tool_output
from reame.tool_calls.stream import Delta, ToolStream

ANSWERS = [
    (
        "hermes",
        'Let me see.\n<tool_call>\n{"name":"get_weather","arguments":{"city":"Ro\\"me"}}\n'
        '</tool_call>\n<tool_call>\n{"name":"noop","arguments":{}}\n</tool_call>',
    ),
    ("hermes", "No call <here>, just <tool text."),
    ("hermes", '<tool_call>\n{"name":"f","arguments":{"a":"}{"}}\n</tool_call> Done.'),
    ("llama3", '{"name":"f","parameters":{"q":[1,{"r":null}]}}'),
    ("llama3", 'Sure: <|python_tag|>{"name":"f","parameters":{"x":"é"}}'),
    (
        "mistral",
        '[TOOL_CALLS][{"name":"f","arguments":{"a":1},"id":"abcdefghi"},'
        '{"name":"g","arguments":{"b":[true]},"id":"012345678"}]',
    ),
    (
        "generic",
        '{"tool_calls":[{"name":"f","arguments":{"a":"b c"}},{"name":"g","arguments":{}}]}',
    ),
    ("generic", '{"response":"Hello, \\"world\\" \\u00e9\\ud83d\\ude00!"}'),
    ("generic", "not json at all"),
]


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def _run(family: str, pieces: list[str]) -> tuple[list[Delta], ToolStream]:
    stream = ToolStream(family)
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
                assert d["type"] == "function" and d["function"]["arguments"] == ""
                calls[d["index"]] = [d["function"]["name"], ""]
            else:
                calls[d["index"]][1] += d["function"]["arguments"]
    return content or None, [tuple(c) for _, c in sorted(calls.items())]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ANSWERS), st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_any_split_gives_what_the_parser_gives(answer: tuple[str, str], cuts: list[int]) -> None:
    family, text = answer
    deltas, stream = _run(family, _split(text, cuts))
    parsed = parse_tool_output(text, family)
    assert _assembled(deltas) == (parsed.content, [(c.name, c.arguments) for c in parsed.calls])
    assert [(c.name, c.arguments) for c in stream.calls] == [
        (c.name, c.arguments) for c in parsed.calls
    ]


def test_a_call_opens_as_soon_as_its_name_is_known_and_its_arguments_flow() -> None:
    stream = ToolStream("hermes")
    assert stream.feed("<tool_call>\n") == []
    assert stream.feed('{"name":"get_wea') == []
    opened = stream.feed('ther","arg')
    assert len(opened) == 1 and opened[0]["function"]["name"] == "get_weather"
    assert opened[0]["index"] == 0 and opened[0]["id"].startswith("call_")
    assert stream.feed('uments":{"city":') == [{"index": 0, "function": {"arguments": '{"city":'}}]
    assert stream.feed('"Ro') == [{"index": 0, "function": {"arguments": '"Ro'}}]
    assert stream.feed('me"}}\n</tool_call>') == [{"index": 0, "function": {"arguments": 'me"}'}}]
    assert stream.finish() == []
    assert stream.calls[0].arguments == '{"city":"Rome"}'


def test_content_flows_but_for_what_may_open_a_call() -> None:
    stream = ToolStream("hermes")
    assert stream.feed("Hello <tool") == ["Hello"]
    assert stream.feed("box> ok") == [" <toolbox> ok"]
    assert stream.finish() == []


def test_a_generic_response_flows_as_content() -> None:
    stream = ToolStream("generic")
    assert stream.feed('{"response":"Hel') == ["Hel"]
    assert stream.feed("lo\\") == ["lo"]
    assert stream.feed('n you"}') == ["\n you"]
    assert stream.finish() == []


def test_the_second_call_gets_the_next_index() -> None:
    text = '{"tool_calls":[{"name":"a","arguments":{}},{"name":"b","arguments":{}}]}'
    deltas, _ = _run("generic", list(text))
    assert [d["index"] for d in deltas if isinstance(d, dict) and "id" in d] == [0, 1]
