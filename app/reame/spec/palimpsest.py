"""The Palimpsest: every finished generation, kept on disk, drafted from by later requests.

Layout: ROOT/<fingerprint>/<segment>.pal, one segment file per writing process (so processes
never write the same file), each a run of records: b"PALR", token count (u32), crc32 of the
tokens (u32), the tokens (i32). A record is written with one write() call; a process killed in
the middle leaves at most a short tail, which readers stop before (and read once it is whole,
if its writer is alive). A complete record whose checksum fails sets the file aside (renamed
*.bad) and its records are dropped. Within `max_bytes`, the segment used longest ago goes first.

In memory: all records in one token array (a separator between records) with an n-gram index,
plus a small dict index of what was added since the index was last built.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import structlog

from reame.spec.ngram_index import SEPARATOR, NgramIndex, hash_of, ngram_hashes

log = structlog.get_logger("reame.palimpsest")

_HEAD = struct.Struct("<4sII")
_MAGIC = b"PALR"
# n-gram lengths looked up, longest first: a long match (the end of the question and the chat
# template's "assistant" header) tells apart answers that a short one mixes up
SIZES = (8, 3)
MIN_RECORD = min(SIZES) + 2  # shorter generations teach nothing
REFRESH_SECONDS = 10.0  # how often an adding process reads what the others added


@dataclass(slots=True)
class _Segment:
    path: Path
    offset: int = 0  # bytes read so far (whole records only)
    tokens: list[np.ndarray] = field(default_factory=list)
    last_used: float = 0.0


def encode_record(tokens: Sequence[int]) -> bytes:
    payload = np.asarray(tokens, dtype="<i4").tobytes()
    return _HEAD.pack(_MAGIC, len(tokens), zlib.crc32(payload)) + payload


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


class Palimpsest:
    """Thread-safe: the engine proposes, the service adds, a refresh reads other processes'."""

    name = "palimpsest"
    runs_a_model = False

    def __init__(
        self, root: Path | None, fingerprint: str, max_bytes: int, segment_bytes: int = 4 << 20
    ) -> None:
        self.directory = root / fingerprint if root is not None else None
        self.max_bytes, self.segment_bytes = max_bytes, segment_bytes
        self._lock = threading.Lock()
        self._segments: dict[str, _Segment] = {}
        self._own: _Segment | None = None
        # all records, a separator before each: _buffer[:_size] (room to grow, so adding a record
        # does not copy the archive)
        self._buffer = np.full(1, SEPARATOR, dtype=np.int32)
        self._size = 1
        self._num_records = 0
        self._last_refresh = 0.0
        self._indexes = {n: NgramIndex(n) for n in SIZES}
        # per size: n-gram hash -> position, for what was added since the last build
        self._recent: dict[int, dict[int, int]] = {n: {} for n in SIZES}
        # where each segment's records start in _tokens (for "last used"), in that order
        self._starts = np.zeros(0, dtype=np.int64)
        self._owners: list[_Segment] = []
        self.num_set_aside = 0
        self.num_write_failures = 0
        if self.directory is not None:
            with contextlib.suppress(OSError):
                self.directory.mkdir(parents=True, exist_ok=True)
        self.refresh()

    # -- drafting ----------------------------------------------------------------------------

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        if k <= 0:
            return []
        with self._lock:
            for n in SIZES:
                key = hash_of(history, n)
                if key is None:
                    continue
                start = self._recent[n].get(key, -1)
                if start < 0:
                    start = self._indexes[n].find(key)
                if start < 0:
                    continue
                tokens = self._tokens
                if list(tokens[start - n : start]) != list(history[-n:]):
                    continue  # a hash collision
                self._mark_used(start)
                run = tokens[start : start + k]
                stop = np.flatnonzero(run == SEPARATOR)
                return [int(t) for t in (run[: stop[0]] if stop.size else run)]
        return []

    def observe(self, proposed: int, accepted: int) -> None:
        pass

    @property
    def _tokens(self) -> np.ndarray:
        return self._buffer[: self._size]

    def _mark_used(self, position: int) -> None:
        i = int(np.searchsorted(self._starts, position, side="right")) - 1
        if i >= 0:
            self._owners[i].last_used = time.time()

    # -- adding ------------------------------------------------------------------------------

    def add(self, tokens: Sequence[int]) -> None:
        """Keep a finished generation (in memory now, on disk at once)."""
        if len(tokens) < MIN_RECORD:
            return
        record = np.asarray(tokens, dtype=np.int32)
        with self._lock:
            self._append(record)
            self._write(record)
            self._evict()
        if time.monotonic() - self._last_refresh >= REFRESH_SECONDS:
            self.refresh()  # what the machine's other processes added meanwhile

    def _append(self, record: np.ndarray) -> None:
        base = self._size
        end = base + record.size + 1
        if end > self._buffer.size:
            grown = np.empty(max(end, 2 * self._buffer.size), dtype=np.int32)
            grown[:base] = self._buffer[:base]
            self._buffer = grown
        self._buffer[base : end - 1] = record
        self._buffer[end - 1] = SEPARATOR
        self._size = end
        self._num_records += 1
        # the n-grams ending before the record's last token, each pointing at its follower
        for n, recent in self._recent.items():
            hashes = ngram_hashes(record[:-1], n)
            recent.update(zip(hashes.tolist(), range(base + n, base + record.size), strict=True))
        if len(self._recent[min(SIZES)]) > max(4096, self._indexes[min(SIZES)].size // 8):
            self._build_indexes()

    def _write(self, record: np.ndarray) -> None:
        if self.directory is None:
            return
        try:
            if self._own is None or self._own.offset >= self.segment_bytes:
                name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.pal"
                self._own = _Segment(self.directory / name, last_used=time.time())
                self._segments[name] = self._own
                # NOTE: its records start with the one being written (already in _tokens)
                self._starts = np.append(self._starts, self._size - record.size - 1)
                self._owners.append(self._own)
            data = encode_record(record.tolist())
            with open(self._own.path, "ab") as f:
                f.write(data)
            self._own.offset += len(data)
            self._own.tokens.append(record)
        except OSError as exc:
            self.num_write_failures += 1
            if self.num_write_failures == 1:
                log.warning("palimpsest cannot write; drafting goes on", error=str(exc))

    # -- disk --------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read what other processes added, drop what they evicted, set aside what is bad."""
        if self.directory is None:
            return
        with self._lock:
            self._last_refresh = time.monotonic()
            changed = False
            try:
                names = {p.name for p in self.directory.glob("*.pal")}
            except OSError:
                return
            for name in list(self._segments):
                if name not in names:  # evicted by another process
                    if self._segments.pop(name) is self._own:
                        self._own = None
                    changed = True
            for name in sorted(names):
                seg = self._segments.get(name)
                if seg is not None and seg is self._own:
                    continue
                if seg is None:
                    seg = self._segments[name] = _Segment(self.directory / name)
                changed |= self._read(seg)
            if changed:
                self._rebuild()
            self._evict()

    def _read(self, seg: _Segment) -> bool:
        try:
            with open(seg.path, "rb") as f:  # NOTE: only what was added since the last read
                f.seek(seg.offset)
                data = f.read()
                seg.last_used = max(seg.last_used, os.fstat(f.fileno()).st_mtime)
        except OSError:
            return False
        try:
            records, consumed = read_records(data, 0)
            seg.offset += consumed
        except CorruptSegment as exc:
            self.num_set_aside += 1
            log.warning("palimpsest file set aside", path=str(seg.path), reason=str(exc))
            with contextlib.suppress(OSError):
                seg.path.rename(seg.path.with_suffix(".bad"))
            del self._segments[seg.path.name]
            return True
        seg.tokens.extend(records)
        return bool(records)

    def _rebuild(self) -> None:
        parts = [np.full(1, SEPARATOR, dtype=np.int32)]
        starts, owners, size = [], [], 1
        for seg in sorted(self._segments.values(), key=lambda s: s.path.name):
            starts.append(size)
            owners.append(seg)
            for record in seg.tokens:
                parts += [record, np.full(1, SEPARATOR, dtype=np.int32)]
                size += record.size + 1
        self._starts, self._owners = np.asarray(starts, dtype=np.int64), owners
        self._buffer = np.concatenate(parts).astype(np.int32)
        self._size = self._buffer.size
        self._num_records = sum(len(seg.tokens) for seg in self._segments.values())
        self._build_indexes()

    def _build_indexes(self) -> None:
        for n, index in self._indexes.items():
            index.rebuild(self._tokens)
            self._recent[n].clear()

    def _evict(self) -> None:
        if self.directory is None:
            return
        sizes = {name: seg.offset for name, seg in self._segments.items()}  # whole records
        total = sum(sizes.values())
        if total <= self.max_bytes:
            return
        removed = False
        for name in sorted(sizes, key=lambda n: self._segments[n].last_used):
            if total <= self.max_bytes:
                break
            seg = self._segments.pop(name)
            if seg is self._own:
                self._own = None
            with contextlib.suppress(OSError):
                seg.path.unlink()
            total -= sizes[name]
            removed = True
        if removed:
            self._rebuild()

    # -- figures -----------------------------------------------------------------------------

    @property
    def num_tokens(self) -> int:
        return self._size - 1 - self._num_records  # a separator after each record

    @property
    def num_bytes(self) -> int:
        return sum(seg.offset for seg in self._segments.values())


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
