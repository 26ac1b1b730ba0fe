"""A real `reame serve` on 127.0.0.1 for the HTTP tests: the bench's launcher
(reame_bench.serve_process), given REAME_* variables as a test writes them and a throwaway state
directory (never the user's cache), with its log apart from that directory."""

from __future__ import annotations

from pathlib import Path

from reame.config import ENV_PREFIX
from reame_bench.serve_process import ServeProcess, free_port, read_metrics
from state_dirs import new_state_dir

__all__ = ["ServerProcess", "free_port", "small_server"]


class ServerProcess(ServeProcess):
    def __init__(
        self, *args: str, env: dict[str, str] | None = None, entry: str | None = None
    ) -> None:
        """`env`: REAME_* variables; a test that shares a state directory passes
        REAME_STATE_DIR. `entry`: a script to run instead of `python -m reame.cli.main` (one
        that puts a fault into the real server). Its output: `log_lines()`."""
        assert all(k.startswith(ENV_PREFIX) for k in env or {}), env
        settings = {k.removeprefix(ENV_PREFIX).lower(): v for k, v in (env or {}).items()}
        state_dir = Path(settings.pop("state_dir", None) or new_state_dir())
        log_path = new_state_dir() / "serve.log"
        super().__init__(args, settings, state_dir=state_dir, log_path=log_path, entry=entry)

    def metric(self, name: str, labels: str = "") -> float:
        """One sample of /metrics, e.g. metric("reame_running_sequences")."""
        return read_metrics(self.url).get(f"{name}{{{labels}}}" if labels else name, 0.0)


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
