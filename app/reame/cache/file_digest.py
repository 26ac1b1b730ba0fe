"""A whole file's hash, remembered by what stat says of the file, so a restart does not read an
unchanged 4 GB model again.

The memo (a small JSON file) is keyed by device, inode, size, mtime and ctime. ctime catches
what mtime alone does not: an edit in place whose mtime was set back with os.utime (utime itself
moves ctime on, and no system call sets ctime). What the key cannot see is a change that moves
none of these: a write below the filesystem (a raw block device, another machine's mount of a
network filesystem with a coarse or cached ctime) or the system clock set back to the very
nanosecond. A memo that does not parse, or an entry of the wrong shape, is ignored (the file is
hashed again) and rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from reame.cache.private_files import make_dirs, write_atomic

MEMO_NAME = "file-digests.json"
MAX_ENTRIES = 64  # models a machine has had lately; the oldest are forgotten
_DIGEST_BYTES = 16


def digest(path: Path) -> str:
    """blake2b-128 of every byte of the file."""
    with path.open("rb") as f:
        h = hashlib.file_digest(f, lambda: hashlib.blake2b(digest_size=_DIGEST_BYTES))
    return h.hexdigest()


def stat_key(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def cached_digest(path: Path, memo_dir: Path | None) -> str:
    """digest(path), from the memo in memo_dir when the file has not changed since."""
    if memo_dir is None:
        return digest(path)
    memo_path = memo_dir / MEMO_NAME
    memo = read_memo(memo_path)
    key = stat_key(path.stat())
    found = memo.get(key)
    if found is not None:
        return found
    value = digest(path)
    if key == stat_key(path.stat()):  # NOTE: a file changed while it was read is not memoized
        memo.pop(key, None)
        memo[key] = value
        with contextlib.suppress(OSError):  # a read-only state dir only costs the next start
            make_dirs(memo_dir)
            entries = list(memo.items())[-MAX_ENTRIES:]
            write_atomic(memo_path, json.dumps(dict(entries), indent=0).encode(), suffix=".tmp")
    return value


def read_memo(path: Path) -> dict[str, str]:
    """The memo's entries that have the right shape; {} for a missing or damaged file."""
    try:
        loaded = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {k: v for k, v in loaded.items() if isinstance(k, str) and _is_digest(v)}


def _is_digest(value: object) -> bool:
    if not isinstance(value, str) or len(value) != 2 * _DIGEST_BYTES:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True
