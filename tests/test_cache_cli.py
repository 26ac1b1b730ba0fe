"""`reame cache` on a real directory of snapshot files (no model needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from reame.cache.disk_tier import DiskTier
from reame.cache.keys import group_chain, group_of, prefix_key
from reame.cache.snapshot_format import encode
from reame.saved_state import SavedState
from reame_command import reame_command

FINGERPRINT = "f" * 24


def store(root: Path, tokens: list[int], size: int, fingerprint: str = FINGERPRINT) -> Path:
    chain = group_chain(tokens)
    length = len(tokens)
    tier = DiskTier(root, fingerprint, 1 << 40)
    path = tier.path(chain[group_of(length)], length, prefix_key(chain, tokens, length))
    tier.write(path, encode(SavedState(tuple(tokens), os.urandom(size)), fingerprint))
    return path


def cache(*args: str) -> subprocess.CompletedProcess[str]:
    return reame_command("cache", *args)


def test_ls_stats_verify_prune_and_clear(tmp_path: Path) -> None:
    good = store(tmp_path, list(range(100)), 300_000)
    flipped = store(tmp_path, list(range(200)), 300_000)
    data = bytearray(flipped.read_bytes())
    data[-50] ^= 0xFF
    flipped.write_bytes(bytes(data))
    foreign = store(tmp_path, list(range(300)), 300_000, fingerprint="e" * 24)
    os.utime(good, (1, 1))  # the least recently used

    listed = cache("ls", "--dir", str(tmp_path))
    assert listed.returncode == 0 and listed.stdout.count(" tokens ") == 3
    assert "    100 tokens" in listed.stdout and FINGERPRINT in listed.stdout

    assert "snapshots: 3 of 2 model fingerprint(s)" in cache("stats", "--dir", str(tmp_path)).stdout

    verified = cache("verify", "--dir", str(tmp_path))
    assert verified.returncode == 0
    assert "2 good, 1 bad (removed)" in verified.stdout
    assert not flipped.exists() and good.exists() and foreign.exists()

    pruned = cache("prune", "--dir", str(tmp_path), "--max-mb", "0")
    assert "removed 2 snapshot(s)" in pruned.stdout and not good.exists()

    store(tmp_path, list(range(100)), 1000)
    cleared = cache("clear", "--dir", str(tmp_path))
    assert "removed 1 snapshot(s)" in cleared.stdout
    assert not list(tmp_path.rglob("*.kvs"))


def test_a_directory_that_is_a_file_is_a_one_line_error(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    out = cache("stats", "--dir", str(target))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "is not a directory" in out.stderr
