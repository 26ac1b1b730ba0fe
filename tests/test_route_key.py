"""The route key a proxy hashes to keep a conversation on one replica: its formula (pure), and
what a real `reame serve` answers with it, read by the real `openai` client."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from openai import OpenAI

from reame.route_key import ROUTE_HEADER, first_input, responses_chain, route_headers, route_key
from server_process import ServerProcess

MODEL = "smollm2-135m"
SYSTEM = {"role": "system", "content": "You answer in one short line."}


def conversation(first_question: str, turns: int) -> list[dict]:
    out = [SYSTEM, {"role": "user", "content": first_question}]
    for i in range(1, turns):
        out += [
            {"role": "assistant", "content": f"answer {i}"},
            {"role": "user", "content": f"q{i}"},
        ]
    return out


def test_the_turns_of_one_conversation_share_a_key() -> None:
    keys = {route_key(MODEL, conversation("Where are the screws?", n)) for n in (1, 2, 5)}
    assert len(keys) == 1


def test_two_conversations_behind_one_system_prompt_get_two_keys() -> None:
    assert route_key(MODEL, conversation("Where are the screws?", 1)) != route_key(
        MODEL, conversation("Where are the nails?", 1)
    )


def test_the_model_and_the_session_id_change_the_key() -> None:
    chat = conversation("Where are the screws?", 1)
    assert route_key(MODEL, chat) != route_key("other-model", chat)
    by_session = route_key(MODEL, chat, session_id="abc")
    assert by_session.startswith("s-") and by_session == route_key("x", [], session_id="abc")
    assert route_key(MODEL, chat).startswith("c-")


def test_only_role_and_content_count_as_sent() -> None:
    named = [dict(SYSTEM, name="shop"), {"role": "user", "content": "hi"}]
    assert route_key(MODEL, named) == route_key(MODEL, [SYSTEM, {"role": "user", "content": "hi"}])
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert route_key(MODEL, parts) != route_key(MODEL, [{"role": "user", "content": "hi"}])


def test_a_responses_chain_is_keyed_by_its_first_calls_model_instructions_and_input() -> None:
    """The digest HAProxy's body frontend computes of the same strings (docker/haproxy)."""
    chain = responses_chain(MODEL, "Be brief.", "Hi")
    assert chain == hashlib.sha256(f"{MODEL}|Be brief.|Hi".encode()).hexdigest()[:24]
    assert responses_chain(MODEL, None, "Hi") == responses_chain(MODEL, "", "Hi")
    assert first_input("Hi") == first_input([{"role": "user", "content": "Hi"}]) == "Hi"
    assert first_input([{"role": "user", "content": [{"type": "input_text"}]}]) == ""
    assert first_input([]) == first_input(None) == ""


def test_a_completion_without_a_session_has_no_key() -> None:
    assert route_headers(MODEL, None, None) == {}
    assert route_headers(MODEL, None, "abc") == {ROUTE_HEADER: route_key(MODEL, [], "abc")}


@pytest.fixture(scope="module")
def client() -> Iterator[OpenAI]:
    server = ServerProcess("--threads", "2", "--parallel", "2", "--context-length", "1024")
    yield OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    server.stop()


@pytest.mark.model
@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_answers_with_the_key_the_client_computes(client: OpenAI, stream: bool) -> None:
    chat = conversation("Where are the screws?", 2)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=chat, max_tokens=2, temperature=0, stream=stream
    )
    assert raw.headers[ROUTE_HEADER] == route_key(MODEL, chat)
    assert raw.parse()


@pytest.mark.model
def test_a_session_routes_by_its_id_and_a_bare_completion_not_at_all(client: OpenAI) -> None:
    chat = conversation("Where are the screws?", 1)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=chat, max_tokens=2, extra_body={"session_id": "route-test"}
    )
    assert raw.headers[ROUTE_HEADER] == route_key(MODEL, chat, session_id="route-test")
    bare = client.completions.with_raw_response.create(model=MODEL, prompt="7 + 5 =", max_tokens=2)
    assert ROUTE_HEADER not in bare.headers
