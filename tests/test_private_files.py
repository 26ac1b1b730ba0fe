"""Files Reame writes whole: atomic, private, and durable with their rename."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from reame.cache.private_files import write_atomic


def test_a_write_is_whole_private_and_its_directory_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "snapshot.bin"
    write_atomic(target, b"state")
    assert target.read_bytes() == b"state"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert list(tmp_path.iterdir()) == [target]  # no part left behind
    # before the fix the rename was not made durable: the directory was never synced
    assert synced == ["file", "directory"]
