"""The grammars of the XML (Qwen3-Coder) and Python (LFM2) calls, run token by token through
llguidance over SmolLM2's real vocabulary; what they let through reads back as the calls."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from reame.grammar.matcher import Grammar, Grammars, GrammarSpec
from reame.grammar.tool_calls import tool_grammar
from reame.llama.model import Model
from reame.tool_calls.parse import parse_tool_output

# NOTE: llguidance reads the vocabulary through a deprecated llama-cpp-python call, per token
pytestmark = [pytest.mark.model, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "days": {"$ref": "#/$defs/days"},
                    "city": {"type": "string"},
                    "metric": {"type": "boolean"},
                    "unit": {"type": "string", "enum": ["C", "F"]},
                },
                "required": ["city"],
                "$defs": {"days": {"type": "integer", "minimum": 1}},
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "strict": True}},
]
NAMED = {"type": "function", "function": {"name": "get_time"}}
# NOTE: SmolLM2 has no tool tokens: its <|im_start|> (1) and <|im_end|> (2) stand in
SPECIAL = {"<tool_call>": 1, "</tool_call>": 2, "<|tool_call_start|>": 1, "<|tool_call_end|>": 2}
Piece = str | int  # text, or a special token by id
Accepts = Callable[[Grammar, Sequence[Piece]], bool]


@pytest.fixture(scope="module")
def model(smollm2_path: Path) -> Iterator[Model]:
    with Model(smollm2_path) as model:
        yield model


@pytest.fixture(scope="module")
def grammars(model: Model) -> Grammars:
    return Grammars(model.vocab_handle, model.vocab_size, model.end_of_generation_ids())


@pytest.fixture(scope="module")
def accepts(model: Model, grammars: Grammars) -> Accepts:
    def accepts(grammar: Grammar, pieces: Sequence[Piece]) -> bool:
        """Whether the grammar takes every token of the pieces and may end there."""
        matcher = grammar.matcher()
        for piece in pieces:
            for token in [piece] if isinstance(piece, int) else grammars.tokenize(piece):
                if matcher.is_finished or not matcher.allowed()[token]:
                    return False
                assert matcher.consume([token])
        return matcher.is_finished or bool(matcher.allowed()[model.end_of_generation_ids()[0]])

    return accepts


def _grammar(grammars: Grammars, family: str, choice: object, **options: object) -> Grammar:
    text = tool_grammar(TOOLS, choice, options.get("parallel", True), family, options.get("marks"))
    assert text is not None
    return grammars.compile(GrammarSpec("lark", text, param="tools"))


def _xml(name: str, *arguments: tuple[str, str]) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


WEATHER = _xml("get_weather", ("city", "New York\n<b>here</b>"), ("days", "2"), ("unit", "F"))
TIME = _xml("get_time")


@pytest.mark.parametrize("family", ["qwen3_coder", "lfm2"])
@pytest.mark.parametrize("choice", ["auto", "required", NAMED], ids=["auto", "required", "named"])
@pytest.mark.parametrize("marks", [None, SPECIAL], ids=["text", "special"])
def test_every_choice_compiles(grammars: Grammars, family: str, choice: object, marks) -> None:
    _grammar(grammars, family, choice, marks=marks)


@pytest.mark.parametrize(
    "text",
    [
        WEATHER,
        f"{WEATHER}\n{TIME}",
        _xml("get_weather", ("city", ""), ("metric", "true")),
        _xml("get_weather", ("city", "a </param> b < c")),
    ],
)
def test_xml_required_takes_well_formed_calls_that_read_back(
    grammars: Grammars, accepts: Accepts, text: str
) -> None:
    assert accepts(_grammar(grammars, "qwen3_coder", "required"), [text])
    calls = parse_tool_output(text, "qwen3_coder", TOOLS).calls
    assert len(calls) == text.count("<tool_call>")
    assert all(isinstance(json.loads(c.arguments), dict) for c in calls)


@pytest.mark.parametrize(
    "text",
    [
        "It is sunny.",
        _xml("get_weather", ("days", "2")),  # city is required
        _xml("get_weather", ("days", "2"), ("city", "Rome")),  # the required ones come first
        _xml("get_weather", ("city", "Rome"), ("days", "0")),  # below its minimum ($ref)
        _xml("get_weather", ("city", "Rome"), ("metric", "True")),  # JSON's true, not Python's
        _xml("get_weather", ("city", "Rome"), ("unit", "K")),  # not of the enum
        _xml("get_weather", ("city", "a</parameter>b")),  # a value ends at </parameter>
        _xml("get_time", ("x", "1")),
        _xml("nope"),
        "<tool_call>\n<function=get_time></function>\n</tool_call>",
        f"{TIME} and after",
    ],
)
def test_xml_required_refuses_what_is_not_a_call(
    grammars: Grammars, accepts: Accepts, text: str
) -> None:
    assert not accepts(_grammar(grammars, "qwen3_coder", "required"), [text])


def test_xml_auto_is_free_until_the_call_opens(grammars: Grammars, accepts: Accepts) -> None:
    grammar = _grammar(grammars, "qwen3_coder", "auto")
    assert accepts(grammar, ["Any <b>text</b> at all, <function=x> even."])
    assert accepts(grammar, [f"Let me look.\n\n{WEATHER}\n{TIME}"])
    assert not accepts(grammar, ["Let me look.\n<tool_call>\n<function=nope>\n"])


def test_xml_one_call_when_not_parallel_or_named(grammars: Grammars, accepts: Accepts) -> None:
    for grammar in (
        _grammar(grammars, "qwen3_coder", "required", parallel=False),
        _grammar(grammars, "qwen3_coder", NAMED),
    ):
        assert accepts(grammar, [TIME])
        assert not accepts(grammar, [f"{TIME}\n{TIME}"])
    assert not accepts(_grammar(grammars, "qwen3_coder", NAMED), [WEATHER])


def test_xml_markers_go_as_the_special_tokens(grammars: Grammars, accepts: Accepts) -> None:
    inner = TIME.removeprefix("<tool_call>").removesuffix("</tool_call>")
    assert accepts(_grammar(grammars, "qwen3_coder", "auto", marks=SPECIAL), ["Hi\n", 1, inner, 2])
    required = _grammar(grammars, "qwen3_coder", "required", marks=SPECIAL)
    assert accepts(required, [1, inner, 2])
    assert not accepts(required, [TIME])  # the markers written as text are not them


LFM2_WEATHER = '[get_weather(city="New \\"York\\")", days=2, metric=True, unit="C")]'


@pytest.mark.parametrize(
    ("calls", "names"),
    [
        (LFM2_WEATHER, ["get_weather"]),
        ('[get_weather(city="Rome"), get_time()]', ["get_weather", "get_time"]),
        ('[get_weather(city="", metric=False), get_weather(city="Oslo")]', ["get_weather"] * 2),
    ],
)
def test_lfm2_required_takes_well_formed_calls_that_read_back(
    grammars: Grammars, accepts: Accepts, calls: str, names: list[str]
) -> None:
    text = f"<|tool_call_start|>{calls}<|tool_call_end|>"
    assert accepts(_grammar(grammars, "lfm2", "required"), [text])
    assert [c.name for c in parse_tool_output(text, "lfm2").calls] == names


def test_lfm2_values_read_back_as_json(grammars: Grammars, accepts: Accepts) -> None:
    text = f"<|tool_call_start|>{LFM2_WEATHER}<|tool_call_end|>"
    assert accepts(_grammar(grammars, "lfm2", "required"), [text])
    [call] = parse_tool_output(text, "lfm2").calls
    assert call.arguments == '{"city":"New \\"York\\")","days":2,"metric":true,"unit":"C"}'


@pytest.mark.parametrize(
    "calls",
    [
        "[get_weather(days=2)]",  # city is required
        '[get_weather(days=2, city="Rome")]',  # the required ones come first
        '[get_weather(city="Rome", metric=true)]',  # Python's True
        "[get_weather(city='Rome')]",  # a string is written as JSON's
        '[get_weather(city="Rome", days=0)]',
        '[get_weather(city="Rome",days=2)]',
        "[get_time(x=1)]",
        "[nope()]",
        "[]",
        "get_time()",
    ],
)
def test_lfm2_required_refuses_what_is_not_a_call(
    grammars: Grammars, accepts: Accepts, calls: str
) -> None:
    text = f"<|tool_call_start|>{calls}<|tool_call_end|>"
    assert not accepts(_grammar(grammars, "lfm2", "required"), [text])


def test_lfm2_auto_is_free_until_the_call_opens_as_a_special_token(
    grammars: Grammars, accepts: Accepts
) -> None:
    grammar = _grammar(grammars, "lfm2", "auto", marks=SPECIAL)
    assert accepts(grammar, ["See [the docs](https://x.y) (or f(a=1))."])
    assert accepts(grammar, ["Let me look.", 1, "[get_time(), get_time()]", 2])
    assert not accepts(grammar, ["Let me look.", 1, "[get_time()]", 2, " more"])
    assert not accepts(grammar, ["Let me look.", 1, "[nope()]", 2])


def test_lfm2_one_call_when_not_parallel(grammars: Grammars, accepts: Accepts) -> None:
    grammar = _grammar(grammars, "lfm2", "required", parallel=False)
    assert accepts(grammar, ["<|tool_call_start|>[get_time()]<|tool_call_end|>"])
    assert not accepts(grammar, ["<|tool_call_start|>[get_time(), get_time()]<|tool_call_end|>"])
