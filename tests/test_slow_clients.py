"""Clients that stop reading, send slowly or just hold connections: each is cut off or refused,
its work ends, and a client that reads is served meanwhile."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from server_process import ServerProcess, small_server

MODEL = "smollm2-135m"
TIMEOUT = 2  # client_timeout_seconds of the server under test
MAX_CONNECTIONS = 48
NO_END = {"0": -100, "1": -100, "2": -100}  # SmolLM2's ends: an answer runs to max_tokens


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(
        context_length=4096,
        env={
            "REAME_CLIENT_TIMEOUT_SECONDS": str(TIMEOUT),
            "REAME_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
            "REAME_STREAM_INTERVAL_MS": "0",
        },
    )
    yield srv
    srv.stop()


def raw_request(port: int, body: dict, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket()
    if receive_buffer is not None:  # NOTE: before connect, so the window stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def wait_for(check, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_a_stream_whose_client_stops_reading_is_cut_off_and_its_sequence_freed(
    server: ServerProcess,
) -> None:
    # before the fix it held its sequence until max_tokens were written, and its handler for
    # as long as the connection stayed open
    max_tokens = 3000
    generated_before = server.metric("reame_generated_tokens_total")
    # NOTE: logprobs make each token's frame about 1 kB: the buffers fill in a few hundred
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": max_tokens,
            "stream": True, "logit_bias": NO_END, "logprobs": 5}  # fmt: skip
    stalled = raw_request(server.port, body, receive_buffer=4096)
    try:
        assert wait_for(lambda: server.metric("reame_running_sequences") == 1, 30)
        # a client that reads is served while the other one stalls
        r = httpx.post(
            f"{server.url}/v1/completions",
            json={"model": MODEL, "prompt": "Hello", "max_tokens": 4},
            timeout=60,
        )
        assert r.status_code == 200
        assert wait_for(lambda: server.metric("reame_cut_off_clients_total") == 1, 90)
        assert wait_for(lambda: server.metric("reame_running_sequences") == 0, 10)
        generated = server.metric("reame_generated_tokens_total") - generated_before
        assert generated < max_tokens  # its work ended before its max_tokens
    finally:
        stalled.close()


def test_a_slow_sender_is_cut_off(server: ServerProcess) -> None:
    sock = socket.create_connection(("127.0.0.1", server.port))
    try:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"
        )
        sock.settimeout(TIMEOUT * 10)
        answer = b""
        while chunk := sock.recv(4096):  # until the server closes the connection
            answer += chunk
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408")
    finally:
        sock.close()


def test_connections_past_the_cap_are_closed_and_the_rest_are_served(
    server: ServerProcess,
) -> None:
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(MAX_CONNECTIONS)]
    try:
        extra = socket.create_connection(("127.0.0.1", server.port))
        extra.settimeout(10)
        try:
            assert extra.recv(1) == b""  # closed as it came
        except ConnectionResetError:
            pass
        finally:
            extra.close()
    finally:
        for sock in idle:
            sock.close()

    def served() -> bool:
        try:
            return httpx.get(f"{server.url}/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    assert wait_for(served, 10)
    assert server.metric("reame_refused_connections_total") >= 1


def test_a_stream_whose_client_stops_reading_computes_nothing_while_it_waits() -> None:
    # before the fix its sequence went on computing (1,024 tokens past what the buffers took)
    # until it was cut off, taking the engine from the clients that read
    patient = small_server(
        context_length=4096,
        env={"REAME_CLIENT_TIMEOUT_SECONDS": "120", "REAME_STREAM_INTERVAL_MS": "0"},
    )
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 3000,
            "stream": True, "logit_bias": NO_END, "logprobs": 5}  # fmt: skip
    try:
        stalled = raw_request(patient.port, body, receive_buffer=4096)
        try:
            counts: list[float] = []

            def stopped() -> bool:
                counts.append(patient.metric("reame_engine_step_seconds_count"))
                return len(counts) > 10 and counts[-1] == counts[-11] > 0  # 2 s without a step

            assert wait_for(stopped, 60)
            assert patient.metric("reame_running_sequences") == 1  # held, not ended
            held_at = counts[-1]
            assert held_at < 1000  # steps: the buffers' worth and HOLD_AT, not MAX_UNREAD's
            # a client that reads is served meanwhile
            hello = {"model": MODEL, "prompt": "Hello", "max_tokens": 4}
            r = httpx.post(f"{patient.url}/v1/completions", json=hello, timeout=60)
            assert r.status_code == 200
            # the stalled client reads again: its stream goes on
            stalled.settimeout(10)
            for _ in range(200):
                stalled.recv(65536)
            steps = lambda: patient.metric("reame_engine_step_seconds_count")  # noqa: E731
            assert wait_for(lambda: steps() > held_at + 50, 30)
        finally:
            stalled.close()
    finally:
        patient.stop()
