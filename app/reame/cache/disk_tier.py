"""Snapshots on disk, one file each, shared by every process on the machine.

    ROOT/<fingerprint>/<group[:2]>/<group>/<length>-<key>.kvs

A file appears whole or not at all: it is written as ROOT/tmp/*.part, fsynced, then renamed into
place, so a reader never sees a partial file and two writers of one key each rename a whole file
(the last wins). A file's mtime is its last use: a hit touches it, and eviction removes the
least recently used files until the whole ROOT is within its byte budget, and the group and
fingerprint directories it leaves empty. Files are 0600 and directories 0700.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reame.cache.private_files import make_dirs, make_private, write_atomic
from reame.cache.snapshot_format import HEADER_START, head_size

SUFFIX = ".kvs"
STALE_PART_SECONDS = 600.0  # a .part this old belongs to a writer that died


@dataclass(slots=True, frozen=True)
class StoredFile:
    path: Path
    num_bytes: int
    last_used: float


def group_dir(root: Path, fingerprint: str, group: str) -> Path:
    return root / fingerprint / group[:2] / group


def file_name(length: int, key: str) -> str:
    return f"{length:07d}-{key}{SUFFIX}"


def parse_name(name: str) -> tuple[int, str] | None:
    if not name.endswith(SUFFIX):
        return None
    length, _, key = name[: -len(SUFFIX)].partition("-")
    return (int(length), key) if length.isdigit() and key else None


class DiskTier:
    def __init__(self, root: Path, fingerprint: str, max_bytes: int) -> None:
        self.root, self.fingerprint, self.max_bytes = root, fingerprint, max_bytes
        make_private(root)

    def entries(self, group: str) -> list[tuple[int, str]]:
        """(length, key) of the files in one group; none if the group does not exist."""
        try:
            names = os.listdir(group_dir(self.root, self.fingerprint, group))
        except OSError:
            return []
        return [p for p in map(parse_name, names) if p is not None]

    def path(self, group: str, length: int, key: str) -> Path:
        return group_dir(self.root, self.fingerprint, group) / file_name(length, key)

    def read(self, path: Path) -> bytes | None:
        try:
            data = path.read_bytes()
        except OSError:  # evicted or replaced meanwhile: a miss
            return None
        with contextlib.suppress(OSError):  # a read-only directory still serves its hits
            os.utime(path)
        return data

    def read_head(self, path: Path) -> bytes | None:
        """A file's header, token ids and their checksum (snapshot_format.head_size), without
        its state; None if it cannot be read or does not say how long they are."""
        try:
            with path.open("rb") as f:
                data = f.read(HEADER_START)
                data += f.read(
                    int.from_bytes(data[-4:], "little") if len(data) == HEADER_START else 0
                )
                size = head_size(data)
                data += f.read(max(0, size - len(data)))
        except OSError:
            return None
        return data if size and len(data) == size else None

    def write(self, path: Path, data: bytes) -> None:
        """Atomic: temp file, fsync, rename. Raises OSError (disk full, read-only...)."""
        tmp_dir = self.root / "tmp"
        for attempt in (1, 2):
            make_dirs(tmp_dir)
            make_dirs(path.parent)
            try:
                write_atomic(path, data, tmp_dir)
                return
            except FileNotFoundError:  # NOTE: an eviction removed the emptied group meanwhile
                if attempt == 2:
                    raise

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        remove_empty_parents(self.root, path)

    def evict(self) -> tuple[int, int]:
        return evict(self.root, self.max_bytes)

    def remove_stale_parts(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        count = 0
        for p in (self.root / "tmp").glob("*.part"):
            try:
                if now - p.stat().st_mtime > STALE_PART_SECONDS:
                    p.unlink(missing_ok=True)
                    count += 1
            except OSError:
                continue
        return count


def stored_files(root: Path) -> Iterator[StoredFile]:
    """Every snapshot under ROOT, of every fingerprint."""
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith(SUFFIX):
                p = Path(dirpath) / name
                try:
                    st = p.stat()
                except OSError:
                    continue
                yield StoredFile(p, st.st_size, st.st_mtime)


def evict(root: Path, max_bytes: int) -> tuple[int, int]:
    """Remove least recently used files until ROOT is within max_bytes: (removed, bytes left)."""
    stored = sorted(stored_files(root), key=lambda f: f.last_used)
    total = sum(f.num_bytes for f in stored)
    removed = 0
    for f in stored:
        if total <= max_bytes:
            break
        f.path.unlink(missing_ok=True)
        remove_empty_parents(root, f.path)
        total -= f.num_bytes
        removed += 1
    return removed, total


def remove_empty_parents(root: Path, path: Path) -> None:
    """After `path` went: its group, prefix and fingerprint directories, while each is empty
    (never ROOT or ROOT/tmp). A writer that just made one of them retries (see write)."""
    parent = path.parent
    while parent != root and root in parent.parents and parent != root / "tmp":
        try:
            parent.rmdir()
        except OSError:  # not empty, or gone already
            return
        parent = parent.parent


def remove_empty_dirs(root: Path) -> int:
    """Every empty directory under ROOT but ROOT/tmp, deepest first (the ones left by a server
    of before this rule, or by a kill between two removals): how many."""
    count = 0
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: w[0].count(os.sep), reverse=True):
        directory = Path(dirpath)
        if directory == root or directory == root / "tmp":
            continue
        with contextlib.suppress(OSError):
            directory.rmdir()
            count += 1
    return count
