"""A real `reame serve` on 127.0.0.1 for the HTTP tests, started as a user would start it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from state_dirs import new_state_dir


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(
        self, *args: str, env: dict[str, str] | None = None, entry: str | None = None
    ) -> None:
        """`entry`: a script to run instead of `python -m reame.cli.main` (one that puts a
        fault into the real server)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("REAME_")}
        full_env["PYTHONPATH"] = str(Path(__file__).parents[1] / "app")
        full_env.update(env or {})
        # NOTE: never the user's own cache; a test that shares one passes REAME_STATE_DIR
        full_env.setdefault("REAME_STATE_DIR", str(new_state_dir()))
        self.state_dir = Path(full_env["REAME_STATE_DIR"])
        self.proc = subprocess.Popen(
            [
                sys.executable,
                *([entry] if entry else ["-m", "reame.cli.main"]),
                "serve",
                "--port",
                str(self.port),
                *args,
            ],
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"reame serve exited: {self.proc.stderr.read()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answers: a degraded server says why on /health
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("reame serve did not become healthy")

    def metric(self, name: str, labels: str = "") -> float:
        """One sample of /metrics, e.g. metric("reame_running_sequences")."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as r:
            text = r.read().decode()
        wanted = f"{name}{{{labels}}}" if labels else name
        for line in text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def small_server(
    *args: str,
    parallel: int = 2,
    context_length: int = 512,
    threads: int = 2,
    env: dict[str, str] | None = None,
    entry: str | None = None,
) -> ServerProcess:
    """A server of a few short sequences on this machine's two threads: most HTTP tests'."""
    return ServerProcess(
        "--threads",
        str(threads),
        "--parallel",
        str(parallel),
        "--context-length",
        str(context_length),
        *args,
        env=env,
        entry=entry,
    )
