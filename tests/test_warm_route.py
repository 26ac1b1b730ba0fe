"""`POST /v1/warm` on a real `reame serve` (the embedded SmolLM2): a document computed before
its questions come, so that a question computes only itself and answers as it does cold; a
prompt warmed for completions; the 4xx of bad bodies, and the key."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from openai import OpenAI

from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

KEY = "warm-test-key"
SLOPES = ("north", "east", "south")
DOCUMENT = (
    "You answer questions about the Reame cooperative in one short sentence. The notes: "
    + " ".join(
        f"Member {i} joined in {1990 + i} and keeps {i % 7 + 2} hives on the {SLOPES[i % 3]} slope."
        for i in range(24)
    )
)
QUESTION = "Who keeps the most hives?"


def keyed_server() -> Iterator[ServerProcess]:
    srv = small_server(context_length=1024, env={"REAME_API_KEYS": KEY})
    try:
        yield srv
    finally:
        srv.stop()


warmed = pytest.fixture(keyed_server, scope="module", name="warmed")
cold = pytest.fixture(keyed_server, scope="module", name="cold")


def post(server: ServerProcess, body: object, key: str | None = KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(server.url + "/v1/warm", json=body, headers=headers, timeout=120)


def ask(server: ServerProcess) -> tuple[str, int, int]:
    client = OpenAI(base_url=server.url + "/v1", api_key=KEY)
    answer = client.chat.completions.create(
        model="smollm2-135m",
        messages=[{"role": "system", "content": DOCUMENT}, {"role": "user", "content": QUESTION}],
        temperature=0.0,
        max_tokens=24,
    )
    usage = answer.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    cached = usage.prompt_tokens_details.cached_tokens or 0
    return answer.choices[0].message.content or "", usage.prompt_tokens, cached


def test_a_warmed_document_is_reused_by_its_question_which_answers_as_cold(
    warmed: ServerProcess, cold: ServerProcess
) -> None:
    first = post(warmed, {"messages": [{"role": "system", "content": DOCUMENT}]})
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["object"] == "warm" and body["model"]
    held = body["usage"]["prompt_tokens"]
    assert held > 300 and body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    text, prompt_tokens, cached = ask(warmed)
    # the whole warmed prompt (the system prompt and the next message's role header) is reused
    assert cached >= held and prompt_tokens - cached < 20
    cold_text, _, cold_cached = ask(cold)
    assert cold_cached == 0 and text == cold_text
    # warmed again: its state is held (cut back where it stays exact: a chunk at most less)
    again = post(warmed, {"messages": [{"role": "system", "content": DOCUMENT}]}).json()
    assert held - again["usage"]["prompt_tokens_details"]["cached_tokens"] < 64


def test_a_warmed_prompt_serves_completions_that_go_on_from_it(warmed: ServerProcess) -> None:
    prompt = "Notes on the cooperative. " + DOCUMENT
    body = post(warmed, {"prompt": prompt}).json()
    held = body["usage"]["prompt_tokens"]
    client = OpenAI(base_url=warmed.url + "/v1", api_key=KEY)
    done = client.completions.create(
        model="smollm2-135m", prompt=prompt + " Question: " + QUESTION, max_tokens=4
    )
    assert done.usage is not None and done.usage.prompt_tokens_details is not None
    assert (done.usage.prompt_tokens_details.cached_tokens or 0) >= held - 1


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({}, 400, None),
        ({"prompt": "a", "messages": [{"role": "user", "content": "a"}]}, 400, None),
        ({"prompt": "a", "tools": []}, 400, None),
        ({"prompt": "a", "max_tokens": 3}, 400, "max_tokens"),
        ({"messages": []}, 400, "messages"),
        ({"prompt": [-1]}, 400, "prompt.0"),
        ({"prompt": [True, False]}, 400, "prompt.0"),  # found by the fuzzer: taken as 1, 0
        ({"prompt": "a", "model": "gpt-4o"}, 404, "model"),
        ({"messages": [{"role": "wizard", "content": "a"}]}, 400, "messages.0.role"),
    ],
)
def test_bad_bodies_are_clear_4xx(
    warmed: ServerProcess, body: dict, status: int, param: str | None
) -> None:
    answer = post(warmed, body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["message"] and error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param


def test_a_warm_needs_the_key(warmed: ServerProcess) -> None:
    assert post(warmed, {"prompt": "a"}, key=None).status_code == 401
