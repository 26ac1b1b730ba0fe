"""What `reame serve` does when it cannot start as configured: one line and a non-zero exit, or,
with hold_on_error (the container's setting), a server that answers every request with why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from server_process import ServerProcess, free_port

APP = str(Path(__file__).parents[1] / "app")


def reame(*args: str, env: dict[str, str], **kwargs: object) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REAME_")}
    return subprocess.Popen(
        [sys.executable, "-m", "reame.cli.main", *args],
        env={**clean, "PYTHONPATH": APP, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_for_answer(url: str, proc: subprocess.Popen[str]) -> tuple[int, dict]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() + proc.stdout.read()
        try:
            return get(f"{url}/health")
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the server never answered /health")


def health_command(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reame.cli.main", "health", "--url", url],
        env={**os.environ, "PYTHONPATH": APP},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def held() -> Iterator[callable]:
    procs: list[subprocess.Popen[str]] = []

    def start(env: dict[str, str]) -> tuple[str, subprocess.Popen[str]]:
        port = free_port()
        proc = reame("serve", env={"REAME_HOLD_ON_ERROR": "true", "REAME_PORT": str(port), **env})
        procs.append(proc)
        return f"http://127.0.0.1:{port}", proc

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_misspelt_variable_is_refused_naming_the_right_one(tmp_path: Path) -> None:
    proc = reame("serve", env={"REAME_API_KEY": "secret", "REAME_STATE_DIR": str(tmp_path)})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        "reame: error: unknown setting REAME_API_KEY in the environment; "
        "did you mean REAME_API_KEYS?"
    ]


def test_without_hold_a_missing_model_exits_with_one_line(tmp_path: Path) -> None:
    proc = reame("serve", env={"REAME_MODEL": str(tmp_path / "absent.gguf")})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert len(err.strip().splitlines()) == 1 and "absent.gguf does not exist" in err


def test_held_missing_model_answers_every_route_with_the_reason(held, tmp_path: Path) -> None:
    env = {"REAME_MODEL": "qwen2.5-0.5b", "REAME_ALLOW_DOWNLOAD": "false"}
    url, proc = held({**env, "REAME_MODELS_DIR": str(tmp_path)})
    status, body = wait_for_answer(url, proc)
    assert (status, body["status"]) == (503, "error")
    assert "qwen2.5-0.5b" in body["reason"] and "reame pull" in body["reason"], body

    status, body = post(f"{url}/v1/chat/completions", {"model": "x", "messages": []})
    assert status == 503
    assert body["error"]["code"] == "model_not_found"
    assert body["error"]["type"] == "server_error"

    checked = health_command(url)
    assert checked.returncode == 1
    assert checked.stdout.startswith("unhealthy: Reame could not start:")

    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert [line for line in err.splitlines() if "cannot start" in line], err
    assert "Traceback" not in err


def test_held_misspelt_variable_reports_it_on_health(held, tmp_path: Path) -> None:
    url, proc = held({"REAME_API_KEY": "secret", "REAME_STATE_DIR": str(tmp_path)})
    status, body = wait_for_answer(url, proc)
    assert status == 503
    assert "did you mean REAME_API_KEYS?" in body["reason"]


@pytest.mark.model
def test_unwritable_state_is_reported_by_health_while_serving(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state directory should be")
    srv = ServerProcess(env={"REAME_STATE_DIR": str(blocker)})
    try:
        status, body = get(f"{srv.url}/health")
        assert (status, body["status"]) == (503, "degraded")
        assert f"{blocker}/prefix-cache (Not a directory)" in body["reason"]
        assert "Palimpsest" in body["reason"]
        assert health_command(srv.url).returncode == 1

        status, body = post(
            f"{srv.url}/v1/chat/completions",
            {
                "model": "smollm2-135m",
                "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 4,
            },
        )
        assert status == 200 and body["usage"]["completion_tokens"] >= 1
    finally:
        srv.stop()
    assert blocker.read_text() == "a file where the state directory should be"


@pytest.mark.model
def test_reame_health_says_ok_for_a_healthy_server() -> None:
    srv = ServerProcess()
    try:
        checked = health_command(srv.url)
        assert (checked.returncode, checked.stdout.strip()) == (0, "ok")
    finally:
        srv.stop()
