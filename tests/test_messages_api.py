"""Anthropic's Messages API through the real `anthropic` SDK, unmodified, against a real `reame
serve` on the embedded SmolLM2: create and stream (the same greedy answer), stop sequences, a
tool-use round trip (forced, then the tool's result), streamed tool input, count_tokens, thinking
blocks sent back, the key by `x-api-key` as by Bearer, and errors in Anthropic's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import pytest

from server_process import ServerProcess, small_server
from test_structured_http import WEATHER as CHAT_WEATHER

pytestmark = pytest.mark.model

KEY = "messages-test-key"
MODEL = "smollm2-135m"
# NOTE: the current specification dropped temperature; Reame still takes it, as earlier ones sent it
GREEDY = {"temperature": 0.0}
BRIEF = "Be brief. " + "You answer questions on geography for a school quiz. " * 8
QUESTION = [{"role": "user", "content": "What is the capital of France? Say it in a sentence."}]
WEATHER = {  # the chat tests' tool, as the Messages API describes one
    "name": CHAT_WEATHER["function"]["name"],
    "description": CHAT_WEATHER["function"]["description"],
    "input_schema": CHAT_WEATHER["function"]["parameters"],
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(parallel=2, context_length=1024, env={"REAME_API_KEYS": KEY})
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)


def text_of(message: anthropic.types.Message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


def test_create_and_stream_give_the_same_greedy_answer(client: anthropic.Anthropic) -> None:
    made = client.messages.create(
        model=MODEL, max_tokens=40, messages=QUESTION, extra_body=GREEDY, system=BRIEF
    )
    assert made.type == "message" and made.role == "assistant" and made.id.startswith("msg_")
    assert made.stop_reason in ("end_turn", "max_tokens") and made.stop_sequence is None
    assert made.usage.input_tokens > 10 and 0 < made.usage.output_tokens <= 40
    with client.messages.stream(
        model=MODEL, max_tokens=40, messages=QUESTION, extra_body=GREEDY, system=BRIEF
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == text_of(final) == text_of(made) != ""
    assert final.stop_reason == made.stop_reason
    # the prompt was computed once: the second time it came from the cache
    total = final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0)
    assert total == made.usage.input_tokens and (final.usage.cache_read_input_tokens or 0) > 0


def test_a_last_assistant_turn_is_the_start_of_the_answer(client: anthropic.Anthropic) -> None:
    """Anthropic's prefill: the answer goes on from the assistant's words, and, greedy, says
    what the model would have said after writing them itself."""
    whole = text_of(
        client.messages.create(model=MODEL, max_tokens=40, messages=QUESTION, extra_body=GREEDY)
    )
    start = " ".join(whole.split()[:4])
    went_on = client.messages.create(
        model=MODEL,
        max_tokens=40,
        messages=[*QUESTION, {"role": "assistant", "content": start}],
        extra_body=GREEDY,
    )
    assert start + text_of(went_on) == whole
    counted = client.messages.count_tokens(
        model=MODEL, messages=[*QUESTION, {"role": "assistant", "content": start}]
    )
    read = went_on.usage.input_tokens + (went_on.usage.cache_read_input_tokens or 0)
    assert counted.input_tokens == read


def test_a_stop_sequence_ends_the_answer_and_is_named(client: anthropic.Anthropic) -> None:
    whole = text_of(
        client.messages.create(model=MODEL, max_tokens=40, messages=QUESTION, extra_body=GREEDY)
    )
    stop = whole.split()[2]  # a word the answer writes
    cut = client.messages.create(
        model=MODEL, max_tokens=40, messages=QUESTION, extra_body=GREEDY, stop_sequences=[stop]
    )
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    assert stop not in text_of(cut) and whole.startswith(text_of(cut))


def test_a_tool_use_round_trip(client: anthropic.Anthropic) -> None:
    asked = [{"role": "user", "content": "What is the weather in Turin, in celsius?"}]
    called = client.messages.create(
        model=MODEL,
        max_tokens=80,
        messages=asked,
        tools=[WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"},
        extra_body=GREEDY,
    )
    assert called.stop_reason == "tool_use"
    use = next(b for b in called.content if b.type == "tool_use")
    assert use.name == "get_weather" and set(use.input) == {"city", "unit"} and use.id
    answered = client.messages.create(
        model=MODEL,
        max_tokens=40,
        tools=[WEATHER],
        extra_body=GREEDY,
        messages=[
            *asked,
            {"role": "assistant", "content": [b.model_dump() for b in called.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "18 C, sunny"}
                ],
            },
        ],
    )
    assert answered.stop_reason in ("end_turn", "max_tokens", "tool_use")
    assert answered.usage.input_tokens + (answered.usage.cache_read_input_tokens or 0) > (
        called.usage.input_tokens + (called.usage.cache_read_input_tokens or 0)
    )


def test_streamed_tool_input_arrives_whole(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model=MODEL,
        max_tokens=80,
        messages=[{"role": "user", "content": "Weather in Oslo in fahrenheit?"}],
        tools=[WEATHER],
        tool_choice={"type": "any"},
        extra_body=GREEDY,
    ) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "content_block_start" in kinds and "content_block_stop" in kinds
    use = next(b for b in final.content if b.type == "tool_use")
    assert use.name == "get_weather" and set(use.input) == {"city", "unit"}
    assert final.stop_reason == "tool_use"


def test_max_tokens_0_keeps_the_prompt_and_writes_nothing(client: anthropic.Anthropic) -> None:
    system = "Keep this in mind. " + "The hives on the north slope are blue. " * 20
    warmed = client.messages.create(model=MODEL, max_tokens=0, messages=QUESTION, system=system)
    assert warmed.content == [] and warmed.stop_reason == "max_tokens"
    assert warmed.usage.output_tokens == 0 and warmed.usage.input_tokens > 100
    asked = client.messages.create(model=MODEL, max_tokens=4, messages=QUESTION, system=system)
    # all of it but what a cold request computes after its last message's start (exactness)
    assert (asked.usage.cache_read_input_tokens or 0) >= warmed.usage.input_tokens - 32


def test_an_output_format_holds_the_answer_to_its_schema(client: anthropic.Anthropic) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    }
    made = client.messages.create(
        model=MODEL,
        max_tokens=60,
        messages=[{"role": "user", "content": "Which city is the capital of Italy? JSON."}],
        output_config={"format": {"type": "json_schema", "schema": schema}},
        extra_body=GREEDY,
    )
    assert made.stop_reason == "end_turn"
    assert set(json.loads(text_of(made))) == {"city"}


def test_count_tokens_counts_what_create_reads(client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(model=MODEL, messages=QUESTION, system="Count me.")
    made = client.messages.create(
        model=MODEL, max_tokens=2, messages=QUESTION, system="Count me.", extra_body=GREEDY
    )
    read = made.usage.input_tokens + (made.usage.cache_read_input_tokens or 0)
    assert counted.input_tokens == read


def test_thinking_blocks_sent_back_are_taken(client: anthropic.Anthropic) -> None:
    made = client.messages.create(
        model=MODEL,
        max_tokens=20,
        extra_body=GREEDY,
        messages=[
            {"role": "user", "content": "Name a colour."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Any colour will do.", "signature": "x"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Blue.", "cache_control": {"type": "ephemeral"}},
                ],
            },
            {"role": "user", "content": [{"type": "text", "text": "Another?"}]},
        ],
    )
    assert text_of(made)


def test_x_api_key_is_the_same_key_as_bearer(server: ServerProcess) -> None:
    chat = httpx.post(
        server.url + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"model": MODEL, "messages": QUESTION, "max_tokens": 2, "session_id": "by-bearer"},
        timeout=60,
    )
    assert chat.status_code == 200, chat.text
    listed = httpx.get(server.url + "/v1/sessions", headers={"x-api-key": KEY}, timeout=30)
    assert "by-bearer" in [s["id"] for s in listed.json()["data"]]
    assert httpx.get(server.url + "/v1/sessions", headers={"x-api-key": "no"}).status_code == 401


def test_errors_come_in_anthropics_shape(
    server: ServerProcess, client: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.AuthenticationError) as denied:
        anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0).messages.create(
            model=MODEL, max_tokens=4, messages=QUESTION
        )
    assert denied.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=4, messages=QUESTION)
    assert missing.value.body["type"] == "error"  # type: ignore[index]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    cases = [
        {"model": MODEL, "messages": QUESTION},  # no max_tokens
        {"model": MODEL, "max_tokens": 4, "messages": QUESTION, "temperature": 1.5},
        {"model": MODEL, "max_tokens": 4, "messages": QUESTION, "frequency_penalty": 1},
        {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": [image]}]},
        {"model": MODEL, "max_tokens": 4, "messages": [{"role": "system", "content": "x"}]},
        {"model": MODEL, "max_tokens": 4, "messages": QUESTION, "tool_choice": {"type": "tool"}},
    ]
    for body in cases:
        answer = httpx.post(
            server.url + "/v1/messages", headers={"x-api-key": KEY}, json=body, timeout=30
        )
        assert answer.status_code == 400, (body, answer.text)
        error = answer.json()
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert error["error"]["message"]
