"""What `reame cache` does to a cache directory: list, check, prune, clear. Works on every
model's snapshots in the directory (each under its fingerprint)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from reame.cache.disk_tier import StoredFile, evict, remove_empty_dirs, stored_files
from reame.cache.snapshot_format import SnapshotError, decode, read_header


@dataclass(slots=True, frozen=True)
class Listed:
    file: StoredFile
    fingerprint: str
    num_tokens: int | None  # None: the header is unreadable


def fingerprint_of(path: Path) -> str:
    """FINGERPRINT/aa/GROUP/file: the directory the file was filed under."""
    return path.parents[2].name


def stored(root: Path) -> list[StoredFile]:
    """Most recently used first."""
    return sorted(stored_files(root), key=lambda f: f.last_used, reverse=True)


def listing(root: Path) -> list[Listed]:
    out = []
    for f in stored(root):
        try:
            with f.path.open("rb") as fh:
                header = read_header(fh.read(4096))
            num_tokens: int | None = int(header.get("num_tokens", 0))
        except (OSError, SnapshotError, ValueError, TypeError):
            num_tokens = None
        out.append(Listed(f, fingerprint_of(f.path), num_tokens))
    return out


def verify(root: Path) -> tuple[int, list[tuple[Path, str]]]:
    """Check every file whole (checksums, sizes, and the fingerprint its directory names);
    remove the bad ones. (good count, [(path, why)])"""
    good, bad = 0, []
    for f in stored(root):
        try:
            decode(f.path.read_bytes(), fingerprint_of(f.path))
            good += 1
        except SnapshotError as exc:
            bad.append((f.path, str(exc)))
            f.path.unlink(missing_ok=True)
        except OSError as exc:
            bad.append((f.path, exc.strerror or str(exc)))
    return good, bad


def prune(root: Path, max_bytes: int) -> tuple[int, int]:
    """Least recently used out until within max_bytes, then the empty directories: (files
    removed, bytes left)."""
    removed, left = evict(root, max_bytes)
    remove_empty_dirs(root)
    return removed, left


def clear(root: Path) -> int:
    files = stored(root)
    for child in root.iterdir() if root.is_dir() else ():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
    return len(files)
