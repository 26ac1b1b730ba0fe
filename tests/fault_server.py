"""Helpers for killing a real `reame serve` and looking at what it left in its state dir."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from reame.cache.disk_tier import SUFFIX
from reame.speculation.palimpsest_records import CorruptSegment, read_records
from reame_command import reame_command
from server_process import ServerProcess

MODEL = "smollm2-135m"
ARGS = ("--threads", "2", "--parallel", "4", "--context-length", "2048", "--spec", "off")


def serve(state_dir: Path) -> ServerProcess:
    return ServerProcess(*ARGS, env={"REAME_STATE_DIR": str(state_dir), "REAME_LOG_LEVEL": "error"})


def kill(server: ServerProcess) -> None:
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(30)


def ask(server: ServerProcess, messages: list[dict[str, str]], max_tokens: int) -> tuple[str, int]:
    """A greedy answer and its cached_tokens."""
    body = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": max_tokens}
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300)
    reply.raise_for_status()
    data = reply.json()
    cached = (data["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return data["choices"][0]["message"]["content"], cached


def wait_for(check: Callable[[], bool], timeout: float, step: float = 0.002) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return False


def part_files(state_dir: Path) -> list[Path]:
    return sorted((state_dir / "prefix-cache" / "tmp").glob("*.part"))


def kvs_files(state_dir: Path) -> list[Path]:
    return sorted((state_dir / "prefix-cache").rglob(f"*{SUFFIX}"))


def pal_summary(state_dir: Path) -> dict[str, int]:
    """The archive's files: records, bytes, and bytes of a torn tail (a record cut short)."""
    out = {"pal_files": 0, "records": 0, "pal_bytes": 0, "torn_tail_bytes": 0, "damaged": 0}
    for path in sorted((state_dir / "palimpsest").rglob("*.pal")):
        data = path.read_bytes()
        out["pal_files"] += 1
        out["pal_bytes"] += len(data)
        try:
            records, end = read_records(data, 0)
        except CorruptSegment:
            out["damaged"] += 1
            continue
        out["records"] += len(records)
        out["torn_tail_bytes"] += len(data) - end
    out["set_aside"] = len(list((state_dir / "palimpsest").rglob("*.bad")))
    return out


def disk_state(state_dir: Path) -> dict[str, int]:
    kvs = kvs_files(state_dir)
    return {
        "kvs": len(kvs),
        "kvs_mb": round(sum(p.stat().st_size for p in kvs) / (1 << 20)),
        "parts": len(part_files(state_dir)),
        **pal_summary(state_dir),
    }


def cache_verify(state_dir: Path) -> str:
    """`reame cache verify`'s last line; fails the test on a bad file."""
    out = reame_command("cache", "verify", "--dir", str(state_dir / "prefix-cache"))
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.endswith(" 0 bad (removed)"), out.stdout
    return last


def palimpsest_stats(state_dir: Path) -> str:
    out = reame_command("palimpsest", "stats", "--dir", str(state_dir / "palimpsest"))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]
