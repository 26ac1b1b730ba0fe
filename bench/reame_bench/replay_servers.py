"""The servers `reame bench --replay` sends its traces to, started fresh for every run so that
runs do not warm each other, and restarted mid-run when asked: `reame serve` (on a new state
directory, which it keeps across the restart), llama-server from its binary (whose RAM cache a
restart loses, as in real life), or a server already running (--url: neither fresh nor
restartable)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reame_bench.serve_process import ServeProcess, free_port
from reame_bench.sse_reader import BenchTargetError
from reame_bench.targets import api_base


class Server(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def logs(self) -> str: ...  # where its log is, "" when it is not this bench's

    def restart(self) -> None: ...

    def stop(self, keep_logs: bool = False) -> None: ...


@dataclass(frozen=True, slots=True)
class Launcher:
    """How to get a server for one run. `fresh`: each run's starts empty; `restartable`: a run
    can restart it half-way."""

    name: str
    detail: str
    start: Callable[[], Server]
    fresh: bool = True
    restartable: bool = True
    api_key: str | None = None  # a running server's bearer token


class ReameServer:
    def __init__(self, args: Sequence[str], settings: Mapping[str, str]) -> None:
        self.process = ServeProcess(args, settings)

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def logs(self) -> str:
        return str(self.process.log_path)

    def restart(self) -> None:
        old = self.process
        old.stop()  # NOTE: a drained stop: the server writes what it keeps on disk
        self.process = ServeProcess(old.args, old.settings, state_dir=old.state_dir)

    def stop(self, keep_logs: bool = False) -> None:
        self.process.stop()
        if not keep_logs:
            shutil.rmtree(self.process.state_dir, ignore_errors=True)


def llama_server_command(
    binary: Path, model: Path, threads: int, parallel: int, context: int
) -> list[str]:
    """llama-server on the same model, threads and slots: `-c` is the whole context, which
    `-np` slots share, so each slot gets `context` tokens as each of Reame's sequences does."""
    return [str(binary), "-m", str(model), "-t", str(threads), "-c", str(parallel * context),
            "-np", str(parallel)]  # fmt: skip


class LlamaServer:
    """`command`: llama-server and its flags but the address, which this picks."""

    def __init__(self, command: Sequence[str], ready_timeout: float = 180) -> None:
        self.command = list(command)
        self.ready_timeout = ready_timeout
        self.log_dir = Path(tempfile.mkdtemp(prefix="reame-bench-llama-server-"))
        self.log_path = self.log_dir / "llama-server.log"
        self._start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def logs(self) -> str:
        return str(self.log_path)

    def _start(self) -> None:
        self.port = free_port()
        self._log = self.log_path.open("a")
        command = [*self.command, "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self._stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-10:])
                raise BenchTargetError(f"llama-server exited ({self.proc.returncode}):\n{tail}")
            try:  # NOTE: 503 while the model loads, 200 once it serves
                with urllib.request.urlopen(f"{self.url}/health", timeout=2):
                    return
            except (OSError, urllib.error.HTTPError):
                time.sleep(0.25)
        raise BenchTargetError(f"llama-server was not ready after {self.ready_timeout:.0f} s")

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def restart(self) -> None:
        self._stop()
        self._start()

    def stop(self, keep_logs: bool = False) -> None:
        self._stop()
        if not keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)


class RunningServer:
    """A server this bench did not start: it is not restarted, nor stopped."""

    def __init__(self, url: str) -> None:
        self._url = api_base(url)

    @property
    def url(self) -> str:
        return self._url

    @property
    def logs(self) -> str:
        return ""

    def restart(self) -> None:
        raise BenchTargetError(f"{self._url} was not started by this bench: it cannot restart it")

    def stop(self, keep_logs: bool = False) -> None:
        return None
