"""A request's own grammar that fails on the way is the request's doing: a 400 (an error event in
a stream already begun), never a 500 that a proxy or a client takes for the server's fault."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

MODEL = "smollm2-135m"
# So ambiguous that llguidance's Earley parser passes its 2,000 items a row within some 13 x's
# ("consider making your grammar left-recursive"): it then refuses the next token
AMBIGUOUS = "start: a\na: " + " | ".join(" ".join(["a"] * n) for n in range(16, 1, -1))
AMBIGUOUS += ' | "x" | ""'
NO_END = {"0": -100, "1": -100, "2": -100}  # SmolLM2's ends: it writes x's until the parser gives


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server()
    yield srv
    srv.stop()


def body(stream: bool) -> dict:
    return {
        "model": MODEL,
        "prompt": "Write x:",
        "max_tokens": 200,
        "temperature": 0,
        "stream": stream,
        "grammar": {"type": "lark", "value": AMBIGUOUS},
        "logit_bias": NO_END,
    }


def test_a_grammar_that_fails_is_a_400_that_says_why(server: ServerProcess) -> None:
    # before the fix: a 500, "the next token could not be picked (RuntimeError)"
    r = httpx.post(f"{server.url}/v1/completions", json=body(False), timeout=300)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "grammar_failed" and error["param"] == "grammar"
    assert "max is 2000" in error["message"]  # llguidance's own words
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


def test_in_a_stream_it_is_an_error_event_of_the_same_shape(server: ServerProcess) -> None:
    r = httpx.post(f"{server.url}/v1/completions", json=body(True), timeout=300)
    assert r.status_code == 200
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == "grammar_failed" and error["type"] == "invalid_request_error"
