"""A real `reame serve` on 127.0.0.1, started as a user would start it, on a state directory of
its own: the one launcher of it that the benches (`--load`, `--soak`, `--hostile`, `--replay`,
`--cluster`, `--structured`) and the tests' (tests/server_process.py) start, read and stop."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import reame
import reame_bench
from reame.config import ENV_PREFIX
from reame.errors import ConfigError
from reame_bench.sse_reader import BenchTargetError

_FAILURE = re.compile(r"Traceback|Error|Exception|Fatal|fault|Killed")
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def require_loopback(url: str) -> str:
    """A load generator aims at this machine only: a typo must not load someone else's server."""
    host = urlsplit(url if "://" in url else f"http://{url}").hostname or ""
    if host not in LOOPBACK:
        raise ConfigError(f"--load and --soak only target this machine (127.0.0.1), not {host!r}")
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_path(env: Mapping[str, str]) -> str:
    """PYTHONPATH for a child Python that imports reame and reame_bench as this process does."""
    roots = [str(Path(m.__file__).resolve().parents[1]) for m in (reame, reame_bench)]
    return os.pathsep.join(dict.fromkeys(filter(None, [*roots, env.get("PYTHONPATH")])))


class ServeProcess:
    """`args`: what follows `reame serve` (model, settings flags); `settings`: REAME_* values;
    `port` and `state_dir`: a restart's, else new ones. The child's stdout and stderr go to
    `log_path` (default: serve.log in its state directory), never a pipe nobody drains; the
    file's directory is its working directory. `entry`: a script run in place of
    `python -m reame.cli.main` (a test's, that puts a fault into the real server)."""

    def __init__(
        self,
        args: Sequence[str],
        settings: Mapping[str, str],
        ready_timeout: float = 180,
        port: int | None = None,
        state_dir: Path | None = None,
        log_path: Path | None = None,
        entry: str | None = None,
    ) -> None:
        self.args, self.settings = tuple(args), dict(settings)
        self.state_dir = state_dir or Path(tempfile.mkdtemp(prefix="reame-bench-serve-"))
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or self.state_dir / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        env["PYTHONPATH"] = python_path(env)
        env.update({f"{ENV_PREFIX}{k.upper()}": v for k, v in settings.items()})
        env[f"{ENV_PREFIX}STATE_DIR"] = str(self.state_dir)
        env[f"{ENV_PREFIX}LOG_FORMAT"] = "json"  # NOTE: error lines are picked out by level
        command = [sys.executable, *([entry] if entry else ["-m", "reame.cli.main"]), "serve"]
        command += ["--host", "127.0.0.1", "--port", str(self.port), *args]
        self._log = self.log_path.open("a")
        # NOTE: cwd is the log's directory, so a reame.conf where the bench was started does not
        # reach the server unless --config names it
        self.proc = subprocess.Popen(
            command, env=env, cwd=self.log_path.parent, stdout=self._log, stderr=subprocess.STDOUT
        )
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = "\n".join(self.log_lines()[-10:])
                raise BenchTargetError(f"reame serve exited ({self.proc.returncode}):\n{tail}")
            try:
                with urllib.request.urlopen(f"{self.url}/ready", timeout=2):
                    return
            except (OSError, urllib.error.HTTPError):
                time.sleep(0.25)
        raise BenchTargetError(f"reame serve was not ready after {timeout:.0f} s")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (the server drains), then SIGKILL if it does not end in `timeout`."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def error_lines(self) -> list[str]:
        """The log's errors: JSON lines at level error or above, and lines that are not JSON
        but read as a failure (a traceback, a crash message; not a library's warning)."""
        out = []
        for line in self.log_lines():
            try:
                record = json.loads(line)
            except ValueError:
                if _FAILURE.search(line):
                    out.append(line)
                continue
            if isinstance(record, dict) and record.get("level") in ("error", "critical"):
                out.append(line)
        return out


def read_metrics(base: str, headers: Mapping[str, str] | None = None) -> dict[str, float]:
    """/metrics as {"name{labels}": value} (unlabelled series by their bare name)."""
    request = urllib.request.Request(f"{base}/metrics", headers=dict(headers or {}))
    with urllib.request.urlopen(request, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                continue
    return out


def server_5xx(samples: Mapping[str, float]) -> int:
    """5xx answers the server itself counted, on every route."""
    return int(
        sum(
            v
            for k, v in samples.items()
            if k.startswith("reame_requests_total{") and 'status="5' in k
        )
    )
