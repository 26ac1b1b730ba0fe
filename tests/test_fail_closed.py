"""A server that fails closed: no keys on an address other than loopback is refused unless the
operator says so, and why a server fails is told to loopback clients and key holders only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from reame.api.auth import is_loopback
from reame_command import reame_command
from server_process import free_port, small_server
from state_dirs import new_state_dir


def test_loopback_is_told_apart_from_other_addresses() -> None:
    for host in ("127.0.0.1", "127.0.0.5", "::1", "::ffff:127.0.0.1", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.0.2.7", "::ffff:192.0.2.7", "example.org", ""):
        assert not is_loopback(host), host


def test_no_keys_on_every_address_refuses_to_start_with_one_line() -> None:
    # before the fix it served everyone after a warning in the log
    done = reame_command("serve", "--host", "0.0.0.0", "--port", str(free_port()), timeout=120)
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    assert "without API keys" in line and "allow_unauthenticated" in line, done.stderr[-2000:]


def outside_address() -> str | None:
    """An address of this machine that is not loopback, to reach the server from."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this picks the outgoing address
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if is_loopback(address) else address


@pytest.mark.parametrize("flag", [("--allow-unauthenticated",), ("--api-key", "sk-fail-closed")])
def test_keys_or_the_operator_s_word_let_it_serve_on_every_address(flag: tuple[str, ...]) -> None:
    srv = small_server("--host", "0.0.0.0", *flag)
    try:
        headers = {"authorization": "Bearer sk-fail-closed"}
        r = httpx.get(f"{srv.url}/v1/models", headers=headers, timeout=10)
        assert r.status_code == 200, r.text
    finally:
        srv.stop()


def test_why_a_start_failed_is_told_to_loopback_only() -> None:
    # before the fix anyone was told, a key file's path or a store's address included
    address = outside_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REAME_")}
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "app")
    env.update(REAME_STATE_DIR=str(new_state_dir()), REAME_HOLD_ON_ERROR="true")
    env["REAME_MODEL"] = "/nonexistent/model.gguf"
    command = ["serve", "--host", "0.0.0.0", "--port", str(port), "--allow-unauthenticated"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "reame.cli.main", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        inside = wait_health(f"http://127.0.0.1:{port}")
        assert "/nonexistent/model.gguf" in inside["reason"]
        outside = httpx.get(f"http://{address}:{port}/health", timeout=10)
        assert outside.status_code == 503
        assert "/nonexistent" not in outside.text and "server log" in outside.json()["reason"]
    finally:
        proc.terminate()
        proc.wait(30)


def wait_health(url: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return httpx.get(f"{url}/health", timeout=5).json()
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("the held server never answered")
