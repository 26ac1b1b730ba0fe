"""The Palimpsest: every finished generation, kept on disk, drafted from by later requests.

Layout: ROOT/<fingerprint>/<segment>.pal, one segment file per writing process (so processes
never write the same file), each a run of records (palimpsest_records.py), each written with
one write() call: a process killed in the middle leaves at most a short tail, which readers stop
before (and read once it is whole, if its writer is alive). A complete record whose checksum
fails sets the file aside (renamed *.bad) and its records are dropped. Within `max_bytes`, the
segment used longest ago goes first. Files are 0600, directories 0700. With a shared tier
(palimpsest_sync.py), segments also go to and come from other replicas: a peer's is kept in
memory only, read on from where it was read last.

In memory: every record once, in one token array (a separator between records; a segment only
knows where its records lie in it), looked up by an ArchiveIndex (palimpsest_index.py). An
evicted segment's tokens are overwritten with separators (nothing drafts from them) and the
array is compacted once they are a quarter of it. `max_resident_bytes` (default: max_bytes)
bounds what the live records cost in memory: their tokens and index entries.

One lock guards the token array and every segment in it, whether it came from
this process, a file of another, or a peer, so all that changes them is here.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import structlog

from reame import metrics
from reame.cache.private_files import make_dirs, make_private
from reame.speculation.ngram_index import SEPARATOR
from reame.speculation.palimpsest_index import INDEX_ENTRY_BYTES, SIZES, ArchiveIndex
from reame.speculation.palimpsest_records import (
    SEALED,
    CorruptSegment,
    append_record,
    encode_record,
    read_segment,
    segment_name,
)

log = structlog.get_logger("reame.palimpsest")

MIN_RECORD = min(SIZES) + 2  # shorter generations teach nothing
REFRESH_SECONDS = 10.0  # how often an adding process reads what the others added
# what a live token costs in memory: itself (int32) and an entry in the index of each size
TOKEN_BYTES = 4 + INDEX_ENTRY_BYTES * len(SIZES)
_BULK_TOKENS = 4096  # more read at once than this: indexed by a build, not the recent dict


@dataclass(slots=True)
class _Segment:
    name: str
    path: Path | None  # None: another replica's, read from the shared tier
    offset: int = 0  # bytes read so far (whole records only)
    # (start, length) of its records in the token array
    spans: list[tuple[int, int]] = field(default_factory=list)
    last_used: float = 0.0
    num_tokens: int = 0


class Palimpsest:
    """Thread-safe: the engine proposes, the service adds, a refresh reads other processes'."""

    name = "palimpsest"
    runs_a_model = False

    def __init__(
        self,
        root: Path | None,
        fingerprint: str,
        max_bytes: int,
        segment_bytes: int = 4 << 20,
        max_resident_bytes: int | None = None,
    ) -> None:
        self.directory = root / fingerprint if root is not None else None
        self.max_bytes, self.segment_bytes = max_bytes, segment_bytes
        self.max_resident_bytes = max_bytes if max_resident_bytes is None else max_resident_bytes
        self._lock = threading.Lock()
        self._segments: dict[str, _Segment] = {}
        self._own: _Segment | None = None
        # all records, a separator before each: _buffer[:_size] (room to grow, so adding a record
        # does not copy the archive)
        self._buffer = np.full(1, SEPARATOR, dtype=np.int32)
        self._size = 1
        self._live_tokens = 0  # of records whose segment is kept
        self._dead_tokens = 0  # of evicted ones, separators now, until a compaction
        self._index = ArchiveIndex(self._lock, lambda: self._tokens, self._publish)
        # where each record starts in the array (ascending) and its segment (for "last used")
        self._starts: list[int] = []
        self._owners: list[_Segment] = []
        self._last_refresh = 0.0
        # for the shared tier (palimpsest_sync.py), once one is attached: what this process
        # wrote, sealed and evicted since the last sync; the peers' segments it evicted
        self.shares = False
        self._exports: list[tuple[str, bytes]] = []
        self._sealed: dict[str, int] = {}
        self._removed: list[str] = []
        self._forgotten: set[str] = set()
        self.num_set_aside = 0
        self.num_write_failures = 0
        if self.directory is not None:
            with contextlib.suppress(OSError):
                make_dirs(self.directory)
                make_private(self.directory.parent)
                make_private(self.directory)
        self.refresh(background=False)

    # -- drafting ----------------------------------------------------------------------------

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        if k <= 0:
            return []
        with self._lock:
            start = self._index.find(history)
            if start < 0:
                return []
            self._mark_used(start)
            run = self._tokens[start : start + k]
            stop = np.flatnonzero(run == SEPARATOR)
            return [int(t) for t in (run[: stop[0]] if stop.size else run)]

    def observe(self, proposed: int, accepted: int) -> None:
        pass

    @property
    def _tokens(self) -> np.ndarray:
        return self._buffer[: self._size]

    def _mark_used(self, position: int) -> None:
        i = bisect.bisect_right(self._starts, position) - 1
        if i >= 0:
            self._owners[i].last_used = time.time()

    # -- adding ------------------------------------------------------------------------------

    def add(self, tokens: Sequence[int]) -> None:
        """Keep a finished generation (in memory now, on disk at once)."""
        if len(tokens) < MIN_RECORD:
            return
        record = np.asarray(tokens, dtype=np.int32)
        with self._lock:
            seg = self._own_segment()
            self._append(record, seg)
            self._write(record, seg)
            self._evict()
            self._index.maybe_build()
        self._publish()
        if time.monotonic() - self._last_refresh >= REFRESH_SECONDS:
            self.refresh()  # what the machine's other processes added meanwhile

    def _own_segment(self) -> _Segment:
        if self._own is None or self._own.offset >= self.segment_bytes:
            if self._own is not None and self.shares:
                self._sealed[self._own.name] = self._own.offset
            name = segment_name()
            directory = self.directory if self.directory is not None else Path(".")
            self._own = _Segment(name, directory / name, last_used=time.time())
            self._segments[name] = self._own
        return self._own

    def _append(self, record: np.ndarray, seg: _Segment, bulk: bool = False) -> None:
        base = self._size
        end = base + record.size + 1
        if end > self._buffer.size:
            grown = np.empty(max(end, 2 * self._buffer.size), dtype=np.int32)
            grown[:base] = self._buffer[:base]
            self._buffer = grown
        self._buffer[base : end - 1] = record
        self._buffer[end - 1] = SEPARATOR
        self._size = end
        seg.spans.append((base, record.size))
        seg.num_tokens += record.size
        self._live_tokens += record.size
        self._starts.append(base)
        self._owners.append(seg)
        if not bulk:  # NOTE: else the build that follows indexes it
            self._index.add(record, base)

    def _write(self, record: np.ndarray, seg: _Segment) -> None:
        data = encode_record(record.tolist())
        if self.shares:
            self._exports.append((seg.name, data))
        if self.directory is None:
            seg.offset += len(data)
            return
        try:
            assert seg.path is not None
            seg.offset += append_record(seg.path, data)
        except OSError as exc:
            self.num_write_failures += 1
            if self.num_write_failures == 1:
                log.warning("palimpsest cannot write; drafting goes on", error=str(exc))

    def wait_for_index(self, timeout: float = 60.0) -> None:
        """Until the build under way (if any) is swapped in (tests, benches)."""
        self._index.wait(timeout)

    def _compact(self) -> None:
        """The live records into a new array, without the evicted ones' separators; every
        position moves, so the index is built again (synchronously: this is rare, at most once
        a quarter of the archive has been evicted)."""
        parts = [np.full(1, SEPARATOR, dtype=np.int32)]
        size = 1
        starts, owners = [], []
        order = sorted(
            ((s, n, seg) for seg in self._segments.values() for s, n in seg.spans),
            key=lambda p: p[0],
        )
        for seg in self._segments.values():
            seg.spans = []
        for old, count, seg in order:
            parts += [self._buffer[old : old + count], np.full(1, SEPARATOR, dtype=np.int32)]
            seg.spans.append((size, count))
            starts.append(size)
            owners.append(seg)
            size += count + 1
        self._buffer = np.concatenate(parts).astype(np.int32, copy=False)
        self._size = size
        self._starts, self._owners = starts, owners
        self._dead_tokens = 0
        self._index.reset()

    # -- disk --------------------------------------------------------------------------------

    def refresh(self, background: bool = True) -> None:
        """Read what other processes added, drop what they evicted, set aside what is bad."""
        if self.directory is None:
            return
        with self._lock:
            self._last_refresh = time.monotonic()
            try:
                names = {p.name for p in self.directory.glob("*.pal")}
            except OSError:
                return
            for name, seg in list(self._segments.items()):
                if name not in names and seg.path is not None:
                    self._drop(name)  # evicted by another process
            read = 0
            for name in sorted(names):
                seg = self._segments.get(name)
                if seg is not None and (seg is self._own or seg.path is None):
                    continue
                if seg is None:
                    seg = self._segments[name] = _Segment(name, self.directory / name)
                read += self._read(seg)
            self._evict()
            if read > _BULK_TOKENS or (read and not background):
                self._index.build(background)
        self._publish()

    def _read(self, seg: _Segment) -> int:
        """Tokens read."""
        assert seg.path is not None
        try:
            records, consumed, modified = read_segment(seg.path, seg.offset)
        except OSError:
            return 0
        except CorruptSegment as exc:
            self.num_set_aside += 1
            log.warning("palimpsest file set aside", path=str(seg.path), reason=str(exc))
            with contextlib.suppress(OSError):
                seg.path.rename(seg.path.with_suffix(".bad"))
            self._drop(seg.path.name)
            return 0
        seg.last_used = max(seg.last_used, modified)
        seg.offset += consumed
        count = sum(r.size for r in records)
        bulk = count > _BULK_TOKENS
        for record in records:
            self._append(record, seg, bulk=bulk)
        return count

    def _drop(self, name: str) -> None:
        """Forget a segment: its tokens become separators (nothing drafts from them)."""
        seg = self._segments.pop(name)
        if seg is self._own:
            self._own = None
        for start, count in seg.spans:
            self._buffer[start : start + count] = SEPARATOR
        self._live_tokens -= seg.num_tokens
        self._dead_tokens += seg.num_tokens
        seg.spans, seg.num_tokens = [], 0

    def _evict(self) -> None:
        """Least recently used segments out until the files are within max_bytes and the live
        records within max_resident_bytes; the array is compacted once a quarter is dead."""
        total = sum(seg.offset for seg in self._segments.values())  # whole records
        by_age = sorted(self._segments, key=lambda n: self._segments[n].last_used)
        for name in by_age:
            if total <= self.max_bytes and self.live_bytes <= self.max_resident_bytes:
                break
            seg = self._segments[name]
            if seg.path is None:
                self._forgotten.add(name)  # a peer's: not read again
            else:
                if self.directory is not None:
                    with contextlib.suppress(OSError):
                        seg.path.unlink()
                if self.shares:
                    self._removed.append(name)
            total -= seg.offset
            self._drop(name)
        if self._dead_tokens > max(_BULK_TOKENS, (self._live_tokens + self._dead_tokens) // 4):
            self._compact()

    def _publish(self) -> None:
        metrics.PALIMPSEST_RESIDENT_BYTES.set(self.resident_bytes)

    # -- the shared tier (called by palimpsest_sync.py on its own thread) ------------------

    def take_exports(self) -> tuple[list[tuple[str, bytes]], dict[str, int], list[str]]:
        """What to send: records written (segment name, bytes), segments sealed, removed."""
        with self._lock:
            out = (self._exports, self._sealed, self._removed)
            self._exports, self._sealed, self._removed = [], {}, []
            return out

    def peer_offsets(self, listed: dict[str, str]) -> dict[str, int]:
        """Of the listed segments, those to read from the tier, and how far each was read: not
        this machine's files (read from disk), not the evicted."""
        with self._lock:
            out = {}
            for name, status in listed.items():
                seg = self._segments.get(name)
                if seg is None and name not in self._forgotten:
                    out[name] = 0
                elif seg is not None and seg.path is None and not _read_whole(seg, status):
                    out[name] = seg.offset
            return out

    def import_peer(self, name: str, records: list[np.ndarray], consumed: int) -> int:
        """A peer's records read from where its segment was read last, checked
        (palimpsest_tier.py), and the bytes of the segment they took; the records imported."""
        with self._lock:
            seg = self._segments.get(name)
            if seg is None:
                seg = self._segments[name] = _Segment(name, None, last_used=time.time())
            seg.offset += consumed
            bulk = sum(r.size for r in records) > _BULK_TOKENS
            for record in records:
                self._append(record, seg, bulk=bulk)
            self._evict()
            if bulk:
                self._index.build(True)
        self._publish()
        return len(records)

    def refuse_peer(self, name: str) -> None:
        """A peer's segment that does not check out: set aside, not read again."""
        with self._lock:
            self.num_set_aside += 1
            if name in self._segments:
                self._drop(name)
            self._forgotten.add(name)
        self._publish()

    def drop_peers(self, listed: dict[str, str]) -> None:
        """Peers' segments no longer listed: evicted by their writer or by the server."""
        with self._lock:
            for name, seg in list(self._segments.items()):
                if seg.path is None and name not in listed:
                    self._drop(name)

    # -- figures -----------------------------------------------------------------------------

    @property
    def num_tokens(self) -> int:
        return self._live_tokens

    @property
    def num_bytes(self) -> int:
        return sum(seg.offset for seg in self._segments.values())

    @property
    def live_bytes(self) -> int:
        """What the live records cost in memory once indexed (the budget's measure)."""
        return self._live_tokens * TOKEN_BYTES

    @property
    def resident_bytes(self) -> int:
        """What the archive holds in memory now: the token array (its room to grow too), the
        indexes, the recent dicts, the record table."""
        return self._buffer.nbytes + self._index.resident_bytes + len(self._starts) * 16


def _read_whole(seg: _Segment, status: str) -> bool:
    """A sealed segment read to its end: immutable, nothing more to ask for."""
    return status.startswith(SEALED) and seg.offset >= int(status[len(SEALED) :] or 0)
