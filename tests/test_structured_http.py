"""Structured outputs and tool calls through the real `openai` client against a real `reame
serve` on the embedded SmolLM2: the SDK's parse, json_object, tool loops (required, named),
streamed tool-call deltas, and the 400s; every output validated with `jsonschema`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import jsonschema
import pytest
from openai import BadRequestError, OpenAI
from pydantic import BaseModel, Field

from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model


class Person(BaseModel):
    name: str = Field(max_length=40)
    age: int
    city: str = Field(max_length=40)
    job: str = Field(max_length=40)


NOTES = [
    "Maria Rossi is 34, works as a nurse and lives in Turin.",
    "Jon Berg (51) drives a taxi in Oslo.",
    "Aiko Tanaka, aged 28, is a teacher in Osaka.",
    "Pedro Alves, 45, Lisbon, baker.",
    "Dr. Amara Okafor, 39, surgeon, Lagos.",
    "Lukas Meyer is a 23-year-old student from Berlin.",
    "Chen Wei, 60, retired pilot living in Shanghai.",
    "Sofia Lind, 31, architect, Stockholm.",
    "Omar Haddad works as a chef in Beirut; he is 42.",
    "Grace Kim, a 27-year-old designer in Seoul.",
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 40},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
CONVERT = {
    "type": "function",
    "function": {
        "name": "convert_currency",
        "description": "Convert an amount of money",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "to": {"type": "string", "enum": ["EUR", "USD", "JPY"]},
            },
            "required": ["amount", "to"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, CONVERT]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(parallel=2, context_length=1024)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def _model(client: OpenAI) -> str:
    return client.models.list().data[0].id


def _valid_calls(message) -> list[dict]:
    assert message.tool_calls, message
    out = []
    for call in message.tool_calls:
        assert call.id and call.type == "function"
        arguments = json.loads(call.function.arguments)
        jsonschema.validate(arguments, SCHEMAS[call.function.name])
        out.append(arguments)
    return out


def test_the_sdk_parses_a_pydantic_model_from_every_note(client: OpenAI) -> None:
    model = _model(client)
    for note in NOTES:
        completion = client.beta.chat.completions.parse(
            model=model,
            messages=[{"role": "user", "content": f"Extract the person: {note}"}],
            response_format=Person,
            temperature=0.0,
        )
        choice = completion.choices[0]
        assert choice.finish_reason == "stop"
        assert isinstance(choice.message.parsed, Person), note
        jsonschema.validate(json.loads(choice.message.content), Person.model_json_schema())


def test_json_object_always_parses(client: OpenAI) -> None:
    model = _model(client)
    for seed, topic in enumerate(["a cat", "a city", "a car", "a book", "a song"]):
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"Describe {topic} as a small JSON object."}],
            response_format={"type": "json_object"},
            seed=seed,
            max_tokens=300,
        )
        choice = reply.choices[0]
        if choice.finish_reason == "stop":
            assert isinstance(json.loads(choice.message.content), dict)
        else:  # NOTE: any JSON object may run on to max_tokens: it is then a prefix of one
            assert choice.message.content.startswith("{")


class Resident(BaseModel):
    name: str = Field(max_length=40)
    age: int
    city: str = Field(max_length=40)


def test_a_schema_silent_on_other_keys_takes_none(client: OpenAI) -> None:
    """As llama-server: instructor's TOOLS mode sends pydantic's schema, which does not say
    additionalProperties; under JSON Schema's open objects SmolLM2 wrote key after key to
    max_tokens (finish "length", the call never whole)."""
    # NOTE: the tool exactly as instructor 1.17 sends it (its required list sorted)
    schema = {**Resident.model_json_schema(), "required": ["age", "city", "name"]}
    schema.pop("title")
    assert "additionalProperties" not in schema
    described = "Correctly extracted `Person` with all the required parameters with correct types"
    tool = {"name": "Person", "description": described, "parameters": schema}
    reply = client.chat.completions.create(
        model=_model(client),
        messages=[{"role": "user", "content": "Extract: Maria Rossi is 34 and lives in Turin."}],
        tools=[{"type": "function", "function": tool}],
        tool_choice={"type": "function", "function": {"name": "Person"}},
        temperature=0.0,
        max_tokens=200,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    arguments = json.loads(choice.message.tool_calls[0].function.arguments)
    assert set(arguments) == {"name", "age", "city"}


def test_json_object_with_a_schema_follows_the_schema(client: OpenAI) -> None:
    """llama-server's form, which instructor's JSON_SCHEMA mode sends: refused with a 400
    ("response_format.schema") before."""
    schema = {**Person.model_json_schema(), "additionalProperties": False}
    for note in NOTES[:3]:
        reply = client.chat.completions.create(
            model=_model(client),
            messages=[{"role": "user", "content": f"Extract the person as JSON: {note}"}],
            response_format={"type": "json_object", "schema": schema},  # type: ignore[typeddict-unknown-key]
            temperature=0.0,
            max_tokens=200,
        )
        assert reply.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(reply.choices[0].message.content or ""), schema)


@pytest.mark.parametrize(
    "tool_choice",
    ["required", {"type": "function", "function": {"name": "get_weather"}}],
    ids=["required", "named"],
)
def test_a_tool_loop_calls_gets_the_result_and_answers(client: OpenAI, tool_choice) -> None:
    model = _model(client)
    messages: list = [{"role": "user", "content": "What is the weather in Paris right now?"}]
    first = client.chat.completions.create(
        model=model, messages=messages, tools=TOOLS, tool_choice=tool_choice, temperature=0.0
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    _valid_calls(choice.message)
    if isinstance(tool_choice, dict):
        assert choice.message.tool_calls[0].function.name == "get_weather"
    messages.append(choice.message)  # NOTE: as agents do: the SDK's own message object
    for call in choice.message.tool_calls:
        result = json.dumps({"temperature": 18, "sky": "clear"})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    final = client.chat.completions.create(
        model=model, messages=messages, tools=TOOLS, tool_choice="none", temperature=0.0
    )
    assert final.choices[0].finish_reason in ("stop", "length")
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls


def test_streamed_tool_call_deltas_reassemble_to_valid_arguments(client: OpenAI) -> None:
    model = _model(client)
    questions = ["Convert 250 dollars to euros.", "Is it raining in Rome?"]
    for question in questions:
        with client.beta.chat.completions.stream(
            model=model,
            messages=[{"role": "user", "content": question}],
            tools=TOOLS,
            tool_choice="required",
            temperature=0.0,
        ) as stream:
            deltas = [e for e in stream if e.type == "tool_calls.function.arguments.delta"]
            final = stream.get_final_completion()
        assert final.choices[0].finish_reason == "tool_calls"
        assert len(deltas) > 1  # NOTE: the arguments come in pieces, not in one at the end
        _valid_calls(final.choices[0].message)


def test_bad_schemas_tool_choices_and_tool_messages_are_400s(
    client: OpenAI, server: ServerProcess
) -> None:
    model = _model(client)
    user = [{"role": "user", "content": "hi"}]
    cases = [
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "strin"}},
            }
        },  # noqa: E501
        {"extra_body": {"grammar": "start: undefined_rule"}},
        {"extra_body": {"grammar": {"type": "regex", "value": "[a-"}}},
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
        {"tool_choice": "required"},
        {"messages": [*user, {"role": "tool", "tool_call_id": "call_x", "content": "1"}]},
    ]
    for case in cases:
        messages = case.pop("messages", user)
        with pytest.raises(BadRequestError) as raised:
            client.chat.completions.create(model=model, messages=messages, **case)
        body = raised.value.body
        assert isinstance(body, dict) and body["type"] == "invalid_request_error", body
        assert body["message"] and body["param"], body
    # a completion with a grammar that compiles is served under it
    reply = httpx.post(
        f"{server.url}/v1/completions",
        json={"model": model, "prompt": "Is water wet?", "grammar": 'start: "yes" | "no"'},
        timeout=60,
    )
    assert reply.status_code == 200 and reply.json()["choices"][0]["text"] in ("yes", "no")


def test_the_metrics_count_grammars_forced_tokens_and_mask_time(server: ServerProcess) -> None:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line.startswith("reame_grammar")
    }
    assert samples['reame_grammar_requests_total{kind="json_schema"}'] >= len(NOTES)
    assert samples['reame_grammar_requests_total{kind="tools"}'] >= 1
    assert samples["reame_grammar_forced_tokens_total"] > 0
    assert samples["reame_grammar_mask_seconds_count"] > 0


def test_a_conclave_of_structured_answers_votes_on_their_parsed_json(server: ServerProcess) -> None:
    model = _model(OpenAI(base_url=f"{server.url}/v1", api_key="unused"))
    schema = Person.model_json_schema()
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"Extract the person: {NOTES[0]}"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
        "best_of": 2,
        "seed": 5,
        "temperature": 0.7,
    }
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120).json()
    content = reply["choices"][0]["message"]["content"]
    jsonschema.validate(json.loads(content), schema)
    conclave = reply["conclave"]
    assert conclave["n"] == 2 and conclave["answer"] is not None  # NOTE: the json rule's value
    assert json.loads(conclave["answer"]) == json.loads(content)


def test_a_session_keeps_its_state_under_a_grammar(client: OpenAI) -> None:
    model = _model(client)
    messages: list = [{"role": "user", "content": f"Extract the person: {NOTES[1]}"}]
    turns = []
    for _ in range(2):
        reply = client.chat.completions.create(
            model=model,
            messages=messages,
            response_format={"type": "json_object"},
            temperature=0.0,
            max_tokens=60,
            extra_body={"session_id": "structured-1"},
        )
        turns.append(reply)
        messages += [
            {"role": "assistant", "content": reply.choices[0].message.content},
            {"role": "user", "content": "And again, as JSON."},
        ]
    cached = turns[1].usage.prompt_tokens_details.cached_tokens
    assert cached >= turns[0].usage.prompt_tokens  # the first turn's prompt was not computed again
