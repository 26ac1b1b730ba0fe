"""No key takes more than its share: a key flooding the server gets 429s while the others are
served (the request places it holds, running and queued, counted against key_share)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from server_process import ServerProcess, small_server

MODEL = "smollm2-135m"
FLOODER, OTHER = "sk-flooding-key", "sk-other-key"
NO_END = {"0": -100, "1": -100, "2": -100}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    # 1 running + 3 queued places; a key may hold half of them
    srv = small_server(
        "--api-key",
        FLOODER,
        "--api-key",
        OTHER,
        parallel=1,
        context_length=2048,
        env={"REAME_MAX_WAITING": "3"},
    )
    yield srv
    srv.stop()


def test_a_flooding_key_gets_429s_while_another_key_is_served(server: ServerProcess) -> None:
    statuses: list[int] = []
    accepted = threading.Semaphore(0)
    done = threading.Event()

    def hold_a_place() -> None:
        body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 1500,
                "stream": True, "logit_bias": NO_END}  # fmt: skip
        headers = {"authorization": f"Bearer {FLOODER}"}
        with httpx.stream(
            "POST", f"{server.url}/v1/completions", json=body, headers=headers, timeout=120
        ) as r:
            statuses.append(r.status_code)
            accepted.release()
            if r.status_code == 200:
                done.wait(120)

    flood = [threading.Thread(target=hold_a_place) for _ in range(4)]
    for t in flood:
        t.start()
    try:
        for _ in flood:
            assert accepted.acquire(timeout=60)
        assert sorted(statuses) == [200, 200, 429, 429]
        refused = httpx.post(
            f"{server.url}/v1/completions",
            json={"model": MODEL, "prompt": "Hello", "max_tokens": 2},
            headers={"authorization": f"Bearer {FLOODER}"},
            timeout=60,
        )
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "key_quota"
        assert refused.headers["retry-after"] == "1"
        # refused before its body is parsed: a body that is not JSON gets the same 429, not a 400
        # (before that check it was parsed, validated and answered 400 every time)
        unparsed = httpx.post(
            f"{server.url}/v1/chat/completions",
            content=b"{not json",
            headers={"authorization": f"Bearer {FLOODER}", "content-type": "application/json"},
            timeout=60,
        )
        assert unparsed.status_code == 429
        assert unparsed.json()["error"]["code"] == "key_quota"
        # accepted (a place of its own, queued behind the flood): the stream's head says so
        with httpx.stream(
            "POST",
            f"{server.url}/v1/completions",
            json={"model": MODEL, "prompt": "Hello", "max_tokens": 2, "stream": True},
            headers={"authorization": f"Bearer {OTHER}"},
            timeout=60,
        ) as served:
            assert served.status_code == 200
    finally:
        done.set()
        for t in flood:
            t.join(120)


def test_a_key_gets_its_places_back_when_its_calls_end(server: ServerProcess) -> None:
    headers = {"authorization": f"Bearer {FLOODER}"}
    for _ in range(4):  # more calls, one after another, than the key's share at once
        r = httpx.post(
            f"{server.url}/v1/completions",
            json={"model": MODEL, "prompt": "Hi", "max_tokens": 2},
            headers=headers,
            timeout=60,
        )
        assert r.status_code == 200, r.text
