"""OpenAI's Responses API through the real `openai` SDK, unmodified, against a real `reame serve`
on the embedded SmolLM2: create and stream (the same greedy answer), a chain of three calls by
previous_response_id that computes only its new input (with the prefix cache on, and off: the
chain's own state carries it), the same conversation re-sent whole without a chain (through the
prefix cache), function calls and their outputs, a JSON schema, stored responses read, deleted,
kept across a restart, never shown to another key, `store: false`, and bad bodies as 4xx in
OpenAI's error shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

KEY, OTHER_KEY = "responses-test-key", "responses-other-key"
MODEL = "smollm2-135m"
BRIEF = "Be brief. " + "You answer questions on geography for a school quiz. " * 8
QUESTIONS = ["What is the capital of France?", "And of Italy?", "And of Spain?"]
GREEDY = {"temperature": 0.0, "max_output_tokens": 24}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather now in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def keyed_server(**env: str) -> ServerProcess:
    return small_server(
        parallel=2, context_length=1024, env={"REAME_API_KEYS": f"{KEY},{OTHER_KEY}"} | env
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = keyed_server()
    try:
        yield srv
    finally:
        srv.stop()


def client_of(server: ServerProcess, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return client_of(server)


def chain_of_three(client: openai.OpenAI) -> list[openai.types.responses.Response]:
    made: list[openai.types.responses.Response] = []
    for question in QUESTIONS:
        previous = made[-1].id if made else None
        made.append(
            client.responses.create(
                model=MODEL,
                instructions=BRIEF,
                input=question,
                previous_response_id=previous,
                **GREEDY,
            )
        )
    return made


def assert_each_call_computes_only_its_new_input(
    made: list[openai.types.responses.Response],
) -> None:
    for earlier, later in zip(made, made[1:], strict=False):
        assert later.usage is not None and earlier.usage is not None
        cached = later.usage.input_tokens_details.cached_tokens
        assert cached >= earlier.usage.input_tokens, (earlier.usage, later.usage)
        assert later.previous_response_id == earlier.id


def test_create_and_stream_give_the_same_greedy_answer(client: openai.OpenAI) -> None:
    made = client.responses.create(model=MODEL, instructions=BRIEF, input=QUESTIONS[0], **GREEDY)
    assert made.status == "completed" and made.output_text
    assert made.output[0].type == "message" and made.output[0].role == "assistant"
    with client.responses.stream(
        model=MODEL, instructions=BRIEF, input=QUESTIONS[0], **GREEDY
    ) as stream:
        kinds = [event.type for event in stream]
        streamed = stream.get_final_response()
    assert streamed.output_text == made.output_text
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed" and "response.output_text.delta" in kinds
    assert streamed.id != made.id and streamed.usage is not None
    assert streamed.usage.output_tokens == made.usage.output_tokens  # type: ignore[union-attr]


def test_a_chain_of_three_computes_only_each_new_input(client: openai.OpenAI) -> None:
    made = chain_of_three(client)
    assert_each_call_computes_only_its_new_input(made)
    assert "Paris" in made[0].output_text and "Rome" in made[1].output_text


def test_a_chain_is_carried_by_its_own_state_with_the_prefix_cache_off() -> None:
    srv = keyed_server(REAME_PREFIX_CACHE="false")
    try:
        assert_each_call_computes_only_its_new_input(chain_of_three(client_of(srv)))
    finally:
        srv.stop()


def test_a_conversation_resent_whole_is_read_from_the_prefix_cache(client: openai.OpenAI) -> None:
    """The Agents SDK's way without previous_response_id: every call sends the whole input."""
    conversation: list[dict[str, object]] = []
    made = []
    for question in QUESTIONS:
        conversation.append({"role": "user", "content": question + " (whole)"})
        answer = client.responses.create(
            model=MODEL, instructions=BRIEF, input=conversation, store=False, **GREEDY
        )
        conversation += [item.model_dump(exclude_none=True) for item in answer.output]
        made.append(answer)
    for earlier, later in zip(made, made[1:], strict=False):
        assert later.usage.input_tokens_details.cached_tokens >= earlier.usage.input_tokens  # type: ignore[union-attr]


def test_store_false_keeps_nothing(client: openai.OpenAI) -> None:
    made = client.responses.create(model=MODEL, input=QUESTIONS[0], store=False, **GREEDY)
    assert made.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError) as chained:
        client.responses.create(model=MODEL, input="And?", previous_response_id=made.id)
    assert chained.value.body["param"] == "previous_response_id"  # type: ignore[index]


def test_a_stored_response_is_read_and_deleted_by_its_own_key_only(
    server: ServerProcess, client: openai.OpenAI
) -> None:
    made = client.responses.create(model=MODEL, input=QUESTIONS[0], **GREEDY)
    assert client.responses.retrieve(made.id).output_text == made.output_text
    other = client_of(server, OTHER_KEY)
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model=MODEL, input="And?", previous_response_id=made.id)
    client.responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)


def test_a_function_call_and_its_output(client: openai.OpenAI) -> None:
    called = client.responses.create(
        model=MODEL,
        input="What is the weather in Turin?",
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0.0,
        max_output_tokens=60,
    )
    calls = [item for item in called.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather"
    assert set(json.loads(calls[0].arguments)) == {"city"}
    output = {"type": "function_call_output", "call_id": calls[0].call_id, "output": "18 C"}
    answered = client.responses.create(
        model=MODEL,
        previous_response_id=called.id,
        input=[output],
        tools=[WEATHER],
        tool_choice="none",
        **GREEDY,
    )
    assert answered.output_text
    # the same conversation sent whole, as items: the chain kept the call as it was made
    whole = client.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": "What is the weather in Turin?"},
            calls[0].model_dump(exclude_none=True),
            output,
        ],
        tools=[WEATHER],
        tool_choice="none",
        store=False,
        **GREEDY,
    )
    assert whole.output_text == answered.output_text
    assert whole.usage.input_tokens == answered.usage.input_tokens  # type: ignore[union-attr]


def test_a_streamed_function_call_arrives_whole(client: openai.OpenAI) -> None:
    with client.responses.stream(
        model=MODEL,
        input="What is the weather in Turin?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
        parallel_tool_calls=False,
        temperature=0.0,
        max_output_tokens=60,
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    (call,) = [item for item in final.output if item.type == "function_call"]
    assert call.name == "get_weather" and set(json.loads(call.arguments)) == {"city"}
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds


def test_a_json_schema_holds_the_answer(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string"}},
        "required": ["capital"],
        "additionalProperties": False,
    }
    made = client.responses.create(
        model=MODEL,
        input="What is the capital of France? Answer in JSON.",
        text={"format": {"type": "json_schema", "name": "capital", "schema": schema}},
        temperature=0.0,
        max_output_tokens=40,
    )
    assert set(json.loads(made.output_text)) == {"capital"}


def test_fields_it_does_not_act_on_are_taken(client: openai.OpenAI) -> None:
    made = client.responses.create(
        model=MODEL,
        input=QUESTIONS[0],
        include=["reasoning.encrypted_content"],
        metadata={"team": "geo"},
        truncation="disabled",
        prompt_cache_key="geo",
        text={"verbosity": "low"},
        reasoning={"effort": "low", "summary": "auto"},
        user="u-1",
        **GREEDY,
    )
    assert made.output_text and made.metadata == {"team": "geo"}


def test_a_chain_outlives_a_restart_and_a_file_that_does_not_check_out_is_a_miss(
    tmp_path: Path,
) -> None:
    state = str(tmp_path)
    first = keyed_server(REAME_STATE_DIR=state)
    try:
        made = client_of(first).responses.create(
            model=MODEL, instructions=BRIEF, input=QUESTIONS[0], **GREEDY
        )
        spoiled = client_of(first).responses.create(model=MODEL, input="Hello", **GREEDY)
    finally:
        first.stop()
    (path,) = tmp_path.glob(f"responses/*/{spoiled.id}.json")
    path.write_text(path.read_text().replace("Hello", "Howdy"))
    again = keyed_server(REAME_STATE_DIR=state)
    try:
        client = client_of(again)
        later = client.responses.create(
            model=MODEL,
            instructions=BRIEF,
            input=QUESTIONS[1],
            previous_response_id=made.id,
            **GREEDY,
        )
        assert "Rome" in later.output_text
        assert later.usage.input_tokens_details.cached_tokens >= made.usage.input_tokens  # type: ignore[union-attr]
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(spoiled.id)
    finally:
        again.stop()


@pytest.mark.parametrize(
    "body",
    [
        {"model": MODEL, "input": "x", "frequency_penalty": 1},  # a chat field
        {"model": MODEL, "input": [{"type": "zz"}]},
        {"model": MODEL, "input": [{"role": "user", "content": [{"type": "input_image"}]}]},
        {"model": MODEL, "input": [{"type": "item_reference", "id": "msg_1"}]},
        {"model": MODEL, "input": "x", "tools": [{"type": "web_search"}]},
        {"model": MODEL, "input": "x", "tools": [{"type": "function", "name": "f", "x": 1}]},
        {"model": MODEL, "input": "x", "tool_choice": {"type": "function"}},
        {"model": MODEL, "input": "x", "max_output_tokens": 0},
        {"model": MODEL, "input": "x", "conversation": "conv_1"},
        {"model": MODEL, "input": ""},
        {"model": MODEL, "input": "x", "text": {"format": {"type": "json_schema"}}},
        {"model": MODEL, "input": "x", "background": True},
    ],
)
def test_bad_bodies_are_400s_in_openais_shape(server: ServerProcess, body: dict) -> None:
    answer = httpx.post(
        server.url + "/v1/responses",
        headers={"Authorization": f"Bearer {KEY}"},
        json=body,
        timeout=30,
    )
    assert answer.status_code == 400, (body, answer.text)
    error = answer.json()["error"]
    assert error["message"] and error["type"] == "invalid_request_error"


def test_unknown_ids_and_keys(server: ServerProcess, client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_" + "0" * 48)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("../../etc/passwd")
    with pytest.raises(openai.NotFoundError) as chained:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_nope")
    assert chained.value.body["code"] == "response_not_found"  # type: ignore[index]
    denied = httpx.post(server.url + "/v1/responses", json={"model": MODEL, "input": "x"})
    assert denied.status_code == 401
