"""Disks that fail: a small tmpfs that fills up, a remount read-only (root only; skipped with
the reason where mount is refused)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mount(*args: str) -> None:
    """Runs mount(8); skips the test where this machine does not let us mount."""
    result = subprocess.run(["mount", *args], capture_output=True, text=True)
    if result.returncode != 0:
        reason = (result.stderr or result.stdout).strip()
        if any(
            w in reason.lower() for w in ("permission", "not permitted", "superuser", "only root")
        ):
            pytest.skip(f"cannot mount here: {reason}")
        pytest.fail(f"mount {' '.join(args)} failed: {reason}")


def unmount(directory: Path) -> None:
    subprocess.run(["umount", str(directory)], check=True, capture_output=True)


@contextlib.contextmanager
def tmpfs(directory: Path, size: str) -> Iterator[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    try:
        yield directory
    finally:
        unmount(directory)
