"""The Palimpsest's files: the record format, a segment's appends and reads, and what
`reame palimpsest` reads and removes.

A segment file is a run of records: b"PALR", token count (u32), crc32 of the tokens (u32), the
tokens (i32). A short tail (a record still being written, or cut by a kill) is left for later;
a bad magic or checksum is a CorruptSegment.
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reame.cache.private_files import open_append

_HEAD = struct.Struct("<4sII")
SEALED = "sealed:"  # a shared segment's status once its writer started another: "sealed:<bytes>"
_MAGIC = b"PALR"


def encode_record(tokens: Sequence[int]) -> bytes:
    payload = np.asarray(tokens, dtype="<i4").tobytes()
    return _HEAD.pack(_MAGIC, len(tokens), zlib.crc32(payload)) + payload


def record_bytes(data: bytes | memoryview, offset: int) -> int | None:
    """The bytes the record at `offset` takes, by the token count in its head (nothing else of
    it checked); None while its head is not all there."""
    if offset + _HEAD.size > len(data):
        return None
    return _HEAD.size + 4 * _HEAD.unpack_from(data, offset)[1]


class CorruptSegment(Exception):
    pass


def read_records(data: bytes, offset: int) -> tuple[list[np.ndarray], int]:
    """Whole records from `offset`; returns them and where the next one starts. A short tail is
    left for later; a bad magic or checksum raises CorruptSegment."""
    out = []
    while offset + _HEAD.size <= len(data):
        magic, count, crc = _HEAD.unpack_from(data, offset)
        if magic != _MAGIC:
            raise CorruptSegment(f"no record at byte {offset}")
        end = offset + _HEAD.size + 4 * count
        if end > len(data):
            break
        payload = data[offset + _HEAD.size : end]
        if zlib.crc32(payload) != crc:
            raise CorruptSegment(f"checksum of the record at byte {offset}")
        out.append(np.frombuffer(payload, dtype="<i4").astype(np.int32))
        offset = end
    return out, offset


# -- one segment file (the Palimpsest's own reads and writes) ----------------------------------


def segment_name() -> str:
    """A new segment file's name, its writer's alone (so processes never write the same file)."""
    return f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.pal"


def append_record(path: Path, data: bytes) -> int:
    """Append one encoded record in one write() call (a kill leaves at most a short tail); the
    bytes written. Raises OSError, a short write too."""
    fd = open_append(path)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(f"short write: {written} of {len(data)} bytes")
    return len(data)


def read_segment(path: Path, offset: int) -> tuple[list[np.ndarray], int, float]:
    """The whole records after byte `offset`, the bytes they take and the file's mtime. Raises
    OSError, and CorruptSegment for a bad magic or checksum."""
    with open(path, "rb") as f:  # NOTE: only what was added since the last read
        f.seek(offset)
        data = f.read()
        modified = os.fstat(f.fileno()).st_mtime
    records, consumed = read_records(data, 0)
    return records, consumed, modified


# -- maintenance (the `reame palimpsest` command) -----------------------------------------------


@dataclass(slots=True)
class ArchiveStats:
    fingerprint: str
    files: int = 0
    records: int = 0
    tokens: int = 0
    num_bytes: int = 0
    set_aside: int = 0  # *.bad files
    damaged: int = 0  # files that would be set aside when read


def archive_stats(root: Path) -> list[ArchiveStats]:
    """What the archive directory holds, per tokenizer fingerprint (reads every record)."""
    out = []
    for directory in sorted(p for p in root.glob("*") if p.is_dir()):
        stats = ArchiveStats(directory.name)
        stats.set_aside = len(list(directory.glob("*.bad")))
        for path in sorted(directory.glob("*.pal")):
            data = path.read_bytes()
            stats.files += 1
            stats.num_bytes += len(data)
            try:
                records, _ = read_records(data, 0)
            except CorruptSegment:
                stats.damaged += 1
                continue
            stats.records += len(records)
            stats.tokens += sum(r.size for r in records)
        out.append(stats)
    return out


def clear_archive(root: Path) -> int:
    """Remove every archive file (set-aside ones too); how many."""
    removed = 0
    for path in [*root.glob("*/*.pal"), *root.glob("*/*.bad")]:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    return removed
