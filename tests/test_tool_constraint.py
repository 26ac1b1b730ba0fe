from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reame.errors import InvalidRequestError
from reame.grammar.matcher import Grammar, Grammars, GrammarSpec
from reame.grammar.tool_calls import tool_grammar
from reame.llama.model import Model
from reame.tool_calls.family import FAMILIES, tool_family
from test_tool_templates import SMOLLM2

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"$ref": "#/$defs/days"}},
                "required": ["city"],
                "$defs": {"days": {"type": "integer", "minimum": 1}},
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "strict": True}},
]
# NOTE: llguidance reads the vocabulary through a deprecated llama-cpp-python call, per token
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CHOICES = ["auto", "required", {"type": "function", "function": {"name": "get_time"}}]


def test_no_grammar_without_tools_or_with_tool_choice_none() -> None:
    assert tool_grammar(TOOLS, "none", True, "hermes") is None
    assert tool_grammar(None, "auto", True, "hermes") is None
    assert tool_grammar([], "required", True, "generic") is None


def test_the_arguments_are_each_functions_own_schema_without_free_whitespace() -> None:
    text = tool_grammar(TOOLS, "required", True, "generic") or ""
    assert '"x-guidance": {"whitespace_flexible": false, "lenient": true}' in text
    assert '"x-guidance": {"whitespace_flexible": false}' in text  # get_time is strict
    assert '"additionalProperties": false' in text  # get_time takes no arguments


def test_a_named_choice_of_no_tool_is_an_error_not_a_free_answer() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        tool_grammar(TOOLS, {"type": "function", "function": {"name": "nope"}}, True, "hermes")
    assert caught.value.param == "tool_choice"


def test_a_named_choice_leaves_only_that_function() -> None:
    text = tool_grammar(TOOLS, CHOICES[2], True, "hermes") or ""
    assert "get_time" in text and "get_weather" not in text


@pytest.fixture(scope="module")
def model(smollm2_path: Path) -> Iterator[Model]:
    with Model(smollm2_path) as model:
        yield model


@pytest.fixture(scope="module")
def grammars(model: Model) -> Grammars:
    return Grammars(model.vocab_handle, model.vocab_size, model.end_of_generation_ids())


@pytest.fixture(scope="module")
def accepts(model: Model, grammars: Grammars) -> Callable[[Grammar, str], bool]:
    def accepts(grammar: Grammar, text: str) -> bool:
        """Whether the grammar takes every token of text and may end there."""
        matcher = grammar.matcher()
        for token in grammars.tokenize(text):
            if matcher.is_finished or not matcher.allowed()[token]:
                return False
            assert matcher.consume([token])
        return matcher.is_finished or bool(matcher.allowed()[model.end_of_generation_ids()[0]])

    return accepts


@pytest.mark.model
def test_smollm2_is_of_the_generic_family(model: Model) -> None:
    assert tool_family(model.chat_template) == "generic"
    assert model.chat_template == SMOLLM2  # the copy the template tests render


@pytest.mark.model
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("choice", CHOICES, ids=["auto", "required", "named"])
@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("special", [False, True])
def test_every_family_and_choice_compiles(
    grammars: Grammars, family: str, choice: object, parallel: bool, special: bool
) -> None:
    # NOTE: SmolLM2 has no tool tokens: its <|im_start|> (1) and <|im_end|> (2) stand in
    marks = {"<tool_call>": 1, "</tool_call>": 2, "[TOOL_CALLS]": 1, "<|python_tag|>": 1}
    text = tool_grammar(TOOLS, choice, parallel, family, marks if special else None)
    assert text is not None
    grammars.compile(GrammarSpec("lark", text, param="tools"))


WELL_FORMED = [
    '{"tool_calls":[{"name":"get_weather","arguments":{"city":"Rome","days":2}}]}',
    '{"tool_calls":[{"name":"get_time","arguments":{}},{"name":"get_time","arguments":{}}]}',
    '{"response":"It is sunny, \\"really\\"."}',
]
MALFORMED = [
    '{"tool_calls":[{"name":"get_weather","arguments":{"city": "Rome"}}]}',  # a free space
    '{"tool_calls":[{"name":"get_weather","arguments":{"days":2}}]}',  # city is required
    '{"tool_calls":[{"name":"get_weather","arguments":{"city":"Rome","days":0}}]}',  # minimum
    '{"tool_calls":[{"name":"nope","arguments":{}}]}',
    '{"tool_calls":[{"name":"get_time","arguments":{"x":1}}]}',
    '{"tool_calls":[]}',
    "It is sunny.",
    '{"response":"It is sunny."} and more',
]


@pytest.mark.model
@pytest.mark.parametrize("text", WELL_FORMED)
def test_smollm2_generic_grammar_accepts_a_well_formed_answer(
    grammars: Grammars, accepts: Callable[[Grammar, str], bool], text: str
) -> None:
    grammar = grammars.compile(GrammarSpec("lark", tool_grammar(TOOLS, "auto", True, "generic")))
    assert accepts(grammar, text)


@pytest.mark.model
@pytest.mark.parametrize("text", MALFORMED)
def test_smollm2_generic_grammar_refuses_a_malformed_one(
    grammars: Grammars, accepts: Callable[[Grammar, str], bool], text: str
) -> None:
    grammar = grammars.compile(GrammarSpec("lark", tool_grammar(TOOLS, "auto", True, "generic")))
    assert not accepts(grammar, text)


@pytest.mark.model
def test_required_refuses_a_plain_response_and_one_call_is_one_call(
    grammars: Grammars, accepts: Callable[[Grammar, str], bool]
) -> None:
    required = grammars.compile(GrammarSpec("lark", tool_grammar(TOOLS, "required", True)))
    assert not accepts(required, WELL_FORMED[2])
    single = grammars.compile(GrammarSpec("lark", tool_grammar(TOOLS, "required", False)))
    assert accepts(single, WELL_FORMED[0])
    assert not accepts(single, WELL_FORMED[1])


@pytest.mark.model
def test_hermes_auto_is_free_until_the_call_opens(
    grammars: Grammars, accepts: Callable[[Grammar, str], bool]
) -> None:
    grammar = grammars.compile(GrammarSpec("lark", tool_grammar(TOOLS, "auto", True, "hermes")))
    call = '<tool_call>\n{"name":"get_time","arguments":{}}\n</tool_call>'
    assert accepts(grammar, "Any text at all, {even JSON}.")
    assert accepts(grammar, "Let me look.\n" + call + "\n" + call)
    assert not accepts(grammar, 'Let me look.\n<tool_call>\n{"name":"nope"')
