"""What one client can do to others, tried on a real server: freeze it with a regular
expression, or read, extend or delete another key's session."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

MODEL = "smollm2-135m"
ALICE, BOB = "key-alice", "key-bob"
TOKEN_A = 81  # SmolLM2's "a"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(
        "--api-key",
        ALICE,
        "--api-key",
        BOB,
        env={"REAME_VOTE_RULES": '{"final": "Final answer: (\\\\w+)"}'},
    )
    yield srv
    srv.stop()


def post(srv: ServerProcess, key: str, body: dict, timeout: float = 60) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"}
    return httpx.post(f"{srv.url}/v1/chat/completions", json=body, headers=headers, timeout=timeout)


def test_a_request_cannot_send_a_regular_expression_to_run_on_the_server(
    server: ServerProcess,
) -> None:
    # NOTE: the answers are forced to "aaaa...": on 40 a's this pattern backtracks 2^40 times,
    # on the event loop, before the fix (the server answered nothing else meanwhile)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Say a"}],
        "max_tokens": 40,
        "ignore_eos": True,
        "logit_bias": {str(TOKEN_A): 100},
        "best_of": 2,
        "vote_on": "(a+)+b",
    }
    answers: list[httpx.Response] = []
    sent = threading.Thread(target=lambda: answers.append(post(server, ALICE, body)))
    sent.start()
    deadline = time.monotonic() + 120
    while True:  # the server keeps answering others all along
        started = time.monotonic()
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
        assert time.monotonic() - started < 2
        if not sent.is_alive() or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    sent.join(60)
    assert answers and answers[0].status_code == 400, answers and answers[0].text
    error = answers[0].json()["error"]
    assert error["param"] == "vote_on" and "vote_rules" in error["message"]


def test_a_named_rule_of_the_operator_votes(server: ServerProcess) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is 2+2? End with 'Final answer: N'."}],
        "max_tokens": 24,
        "best_of": 2,
        "vote_on": "final",
        "temperature": 0.7,
        "seed": 1,
    }
    answer = post(server, ALICE, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["conclave"]["n"] == 2


def test_a_session_belongs_to_the_key_that_made_it(server: ServerProcess) -> None:
    turn = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Name three colors."}],
        "max_tokens": 8,
        "temperature": 0,
        "session_id": "shared-name",
    }
    assert post(server, ALICE, turn).status_code == 200

    def as_key(key: str, method: str, path: str) -> httpx.Response:
        headers = {"authorization": f"Bearer {key}"}
        return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30)

    assert as_key(BOB, "GET", "/v1/sessions/shared-name").status_code == 404
    assert as_key(BOB, "GET", "/v1/sessions").json()["data"] == []
    assert as_key(BOB, "DELETE", "/v1/sessions/shared-name").status_code == 404
    assert post(server, BOB, turn).status_code == 200  # Bob's own session of that name
    alice = as_key(ALICE, "GET", "/v1/sessions/shared-name").json()
    bob = as_key(BOB, "GET", "/v1/sessions/shared-name").json()
    assert alice["turns"] == 1 and bob["turns"] == 1
    assert [s["id"] for s in as_key(ALICE, "GET", "/v1/sessions").json()["data"]] == ["shared-name"]


@pytest.mark.parametrize("tenancy", [{"REAME_TENANCY": "per_key"}, {}], ids=["set", "default"])
def test_per_key_tenancy_keeps_each_keys_prefixes_apart(tenancy: dict[str, str]) -> None:
    # "default": with more than one key, tenancy is per key unless set (it was shared)
    srv = small_server(
        "--api-key",
        ALICE,
        "--api-key",
        BOB,
        context_length=1024,
        env=tenancy,
    )
    try:
        system = "You are a careful assistant. " * 30  # a long prompt worth caching
        body = {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": "Name three colors."},
            ],
            "max_tokens": 4,
            "temperature": 0,
        }

        def cached(key: str) -> int:
            answer = post(srv, key, body)
            assert answer.status_code == 200, answer.text
            return answer.json()["usage"]["prompt_tokens_details"]["cached_tokens"]

        assert cached(ALICE) == 0
        assert cached(BOB) == 0  # NOTE: Alice's prompt is not Bob's to reuse (nor to time)
        assert cached(ALICE) > 100 and cached(BOB) > 100
        # each key's answers are archived apart, to draft only that key's next answers
        archives = [d for d in (srv.state_dir / "palimpsest").iterdir() if any(d.glob("*.pal"))]
        assert len({d.name.rsplit("-", 1)[-1] for d in archives}) == 2
    finally:
        srv.stop()


def test_sanics_own_errors_keep_their_status_in_openai_shape(server: ServerProcess) -> None:
    # NOTE: on a route that needs no key: Sanic refuses a bad Expect before it has read the
    # headers, and answers it for an empty request, which a keyed route refuses first (401)
    headers = {"expect": "bogus"}
    r = httpx.post(f"{server.url}/health", json={}, headers=headers, timeout=30)
    assert r.status_code == 417, r.text  # NOTE: was a 500 with "Internal error"
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert r.json()["error"]["code"] == "expectation_failed"
