"""Work refused before it is done: a request's places (prompts x n x best_of) are checked against
the server's on the event loop, before anything is validated at length, rendered or tokenized."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server_process import ServerProcess, small_server

MODEL = "smollm2-135m"
PLACES = 2  # parallel 1 + max_waiting 1


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(parallel=1, env={"REAME_MAX_WAITING": "1"})
    yield srv
    srv.stop()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_huge_prompt_list_is_a_400_before_any_prompt_is_worked_on(server: ServerProcess) -> None:
    # before the fix, each of the prompts x n became a job, tokenized on the worker threads,
    # then refused with a 429 by the engine (150,000 prompts and n 8: 62 s and 5.1 GB of RSS)
    before = rss_bytes(server.proc.pid)
    body = {"model": MODEL, "prompt": ["word"] * 100_000, "n": 8, "max_tokens": 1}
    r = httpx.post(f"{server.url}/v1/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "prompt"
    assert "100000 prompts" in error["message"] and f"at most {PLACES}" in error["message"]
    assert rss_bytes(server.proc.pid) - before < 64 << 20


def test_more_places_than_the_server_has_is_a_400(server: ServerProcess) -> None:
    body = {"model": MODEL, "prompt": ["one", "two"], "n": 2, "max_tokens": 1}
    r = httpx.post(f"{server.url}/v1/completions", json=body, timeout=60)
    assert r.status_code == 400, r.text
    assert "needs 4 sequences" in r.json()["error"]["message"]


def test_no_room_is_a_429_with_retry_after_before_the_prompt_is_tokenized(
    server: ServerProcess,
) -> None:
    started, done = threading.Event(), threading.Event()

    def hold_a_place() -> None:
        body = {
            "model": MODEL,
            "prompt": "Once upon a time",
            "max_tokens": 400,
            "stream": True,
            "logit_bias": {"0": -100, "1": -100, "2": -100},  # no end: it runs to max_tokens
        }
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=120) as r:
            for _ in r.iter_lines():
                started.set()
                if done.is_set():
                    break

    holder = threading.Thread(target=hold_a_place)
    holder.start()
    try:
        assert started.wait(60)
        # a prompt far too long for the context: were it tokenized first, it would be a 400
        body = {"model": MODEL, "prompt": "word " * 5000, "n": 2, "max_tokens": 1}
        r = httpx.post(f"{server.url}/v1/completions", json=body, timeout=60)
        assert r.status_code == 429, r.text
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "server_busy"
    finally:
        done.set()
        holder.join(120)
