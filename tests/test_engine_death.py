"""An engine thread that dies: the request in it is answered, /health and /ready say why (503),
new calls are refused, and the process exits non-zero so a supervisor restarts it. A real
server with one fault put into its engine thread (tests/faulty_serve.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from server_process import small_server

pytestmark = pytest.mark.model

MODEL = "smollm2-135m"


def test_a_dead_engine_thread_is_reported_and_ends_the_process() -> None:
    srv = small_server(
        entry=str(Path(__file__).with_name("faulty_serve.py")),
    )
    try:
        assert httpx.get(f"{srv.url}/health", timeout=10).status_code == 200
        body = {"model": MODEL, "messages": [{"role": "user", "content": "DIE now"}]}
        # NOTE: before the fix this request hung for ever and /health said ok; a 500, not a
        # 503: a proxy retries a 503 on another replica, which it would kill too
        answer = httpx.post(f"{srv.url}/v1/chat/completions", json=body, timeout=30)
        assert answer.status_code == 500, answer.text
        assert "engine thread died" in answer.json()["error"]["message"]
        health = httpx.get(f"{srv.url}/health", timeout=10)
        assert health.status_code == 503
        assert "MemoryError: injected fault" in health.json()["reason"]
        ready = httpx.get(f"{srv.url}/ready", timeout=10)
        assert ready.status_code == 503 and "injected fault" in ready.json()["error"]["message"]
        later = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}
        refused = httpx.post(f"{srv.url}/v1/chat/completions", json=later, timeout=30)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "engine_failed"
        code = srv.proc.wait(timeout=60)
        assert code != 0
        assert "injected fault" in "\n".join(srv.log_lines())
    finally:
        srv.stop()
