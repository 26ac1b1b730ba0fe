"""The prefix cache's background writer: each state is encoded once, written to disk, then the
same bytes to the shared tier. A bounded queue: a state offered while the writer is behind is
dropped and counted, never waited for, but while the server stops (`hurry`), when no request
waits on the engine.

Its bound in bytes counts only the queued states the RAM tier has let go: a state RAM still
holds costs the queue no memory of its own. Counting them all dropped the newest states of a
1.7B model (60-70 MB each, 7 of 11 in 6 requests against a 256 MB bound), which a restarted
server then computed again."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from reame import metrics
from reame.cache.background import lower_this_thread
from reame.cache.disk_tier import DiskTier
from reame.cache.fingerprint import Fingerprint
from reame.cache.shared_store import SharedStore
from reame.cache.snapshot_format import encode
from reame.saved_state import SavedState

if TYPE_CHECKING:
    from reame.cache.prefix_cache import CacheConfig

log = structlog.get_logger("reame.cache")

_STOP = object()
CLOSING_ROOM_SECONDS = 5.0  # a state offered while the writer hurries waits this long for room


@dataclass(slots=True, frozen=True)
class Write:
    """A state for the writer; `data`: its encoded bytes, when they came that way (a shared
    hit kept on disk)."""

    group: str
    length: int
    key: str
    state: SavedState
    data: bytes | None = None
    to_shared: bool = True
    queued_at: float = field(default_factory=time.monotonic)
    blocks: tuple[str, ...] = ()  # the block groups it goes on past (SharedStore.put)
    # the keys of the prefixes it holds at its chunk ends: queued before it, they are not
    # written (its file serves them, cut back there exactly)
    covers: frozenset[str] = frozenset()


@dataclass(slots=True, frozen=True)
class _FlushMark:
    done: threading.Event


class SnapshotWriter:
    def __init__(
        self,
        config: CacheConfig,
        fingerprint: Fingerprint,
        disk: DiskTier | None,
        shared: SharedStore | None,
    ) -> None:
        self.config, self.fingerprint, self.disk, self.shared = config, fingerprint, disk, shared
        self._queue: queue.Queue[object] = queue.Queue(maxsize=config.queue_size)
        self._queued_bytes = 0
        self._queued_lock = threading.Lock()
        self._warned: set[str] = set()
        # writes wait while this says the engine computes (see _wait_for_quiet)
        self.is_busy: Callable[[], bool] = lambda: False
        # whether the RAM tier still holds this very state (then queued it costs no memory)
        self.is_kept: Callable[[Write], bool] = lambda write: False
        self._writing: Write | None = None  # taken from the queue, not yet written
        self._hurry = threading.Event()  # a flush or close waits: write at once
        self._is_closing = False
        self._thread = threading.Thread(target=self._write_loop, name="reame-cache-writer")
        self._thread.daemon = True
        self._thread.start()

    def enqueue(self, item: Write) -> None:
        if self._is_closing:  # NOTE: a stopping server's last states wait for room: dropped,
            # they are lost with the process (the newest, computed as it stopped, for its restart)
            deadline = time.monotonic() + CLOSING_ROOM_SECONDS
            while self._queue.full() and self._thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)
        size = len(item.state.data)
        with self._queued_lock:
            if item.covers:
                self._drop_covered(item)
            alone = 0 if self.is_kept(item) else size
            if alone > self.config.queue_bytes or not self._fit_alone(alone):
                metrics.PREFIX_WRITE_DROPS.inc()
                return
            try:
                self._queue.put_nowait(item)
            except queue.Full:
                metrics.PREFIX_WRITE_DROPS.inc()
                return
            self._queued_bytes += size

    def _fit_alone(self, adding: int) -> bool:
        """Keep the bytes of queued states RAM has let go, with `adding` more, within
        queue_bytes: the oldest of them are dropped (RAM let go of the least recently used)."""
        with self._queue.mutex:  # NOTE: queue.Queue's own lock over its deque
            alone = [w for w in self._queue.queue if isinstance(w, Write) and not self.is_kept(w)]
            total = adding + sum(len(w.state.data) for w in alone)
            writing = self._writing
            if writing is not None and not self.is_kept(writing):
                total += len(writing.state.data)
            gone = []
            for write in alone:
                if total <= self.config.queue_bytes:
                    break
                self._queue.queue.remove(write)
                gone.append(write)
                total -= len(write.state.data)
        for write in gone:
            self._queued_bytes -= len(write.state.data)
            metrics.PREFIX_WRITE_DROPS.inc()
        return total <= self.config.queue_bytes

    def _drop_covered(self, item: Write) -> None:
        """Take the queued writes `item` covers out of the queue (a conversation's snapshots,
        each a prefix of the next, filled it, and the newest were dropped: 20 of 38 on the
        replay's chat trace)."""
        with self._queue.mutex:  # NOTE: queue.Queue's own lock over its deque
            gone = [
                w
                for w in self._queue.queue
                if isinstance(w, Write)
                and w.key in item.covers
                and (item.to_shared or not w.to_shared)
            ]
            for write in gone:
                self._queue.queue.remove(write)
        for write in gone:
            self._queued_bytes -= len(write.state.data)
            metrics.PREFIX_WRITES_COVERED.inc()

    def waiting(self, group: str) -> list[Write]:
        """The states of one group queued or being written: until their files are there, a
        lookup finds them here (RAM may have let them go)."""
        with self._queue.mutex:
            held = [*self._queue.queue, self._writing]
        return [w for w in held if isinstance(w, Write) and w.group == group]

    def waiting_state(self, group: str, length: int, key: str) -> SavedState | None:
        """The state of one queued or in-progress write, if it is still waiting."""
        found = (w.state for w in self.waiting(group) if w.key == key and w.length == length)
        return next(found, None)

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    def _wait_for_quiet(self, queued_at: float) -> None:
        """Until the engine has been idle for write_quiet seconds: a client that sends its next
        request at once (the next turn, the next question) must not meet the compression. At
        most until max_write_delay after the state was queued: under steady load the states
        behind it waited that long already, so the queue drains, not one state a delay (which
        dropped nearly every state a client sent back to back)."""
        deadline = queued_at + self.config.max_write_delay
        quiet_since: float | None = None
        while not self._hurry.is_set() and (now := time.monotonic()) < deadline:
            if self.is_busy():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= self.config.write_quiet:
                return
            self._hurry.wait(0.05)

    def _write_loop(self) -> None:
        lower_this_thread()
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, _FlushMark):
                if self._queue.empty() and not self._is_closing:
                    self._hurry.clear()
                item.done.set()
                continue
            assert isinstance(item, Write)
            self._writing = item
            try:
                self._write_one(item)
            finally:
                with self._queued_lock:
                    self._queued_bytes -= len(item.state.data)
                    self._writing = None

    def _write_one(self, item: Write) -> None:
        self._wait_for_quiet(item.queued_at)
        data = item.data
        try:
            if self.disk is not None:
                data = self._to_disk(item, data)
            if item.to_shared and self.shared is not None:  # even when the disk refused
                data = data or self._encode(item.state)
                if self.shared.put(item.group, item.length, item.key, data, item.blocks):
                    metrics.PREFIX_WRITES.labels("shared").inc()
        except Exception:  # never let one snapshot stop the writer
            log.exception("prefix cache write failed")

    def _to_disk(self, item: Write, data: bytes | None) -> bytes | None:
        """Writes the file unless it is there; the bytes written (or read back, for the shared
        tier), None if the disk refused."""
        assert self.disk is not None
        path = self.disk.path(item.group, item.length, item.key)
        try:
            if not path.exists():
                data = data or self._encode(item.state)
                self.disk.write(path, data)
                metrics.PREFIX_WRITES.labels("disk").inc()
            elif data is None and item.to_shared and self.shared is not None:
                data = self.disk.read(path)  # written before: its bytes for the shared tier
            removed, total = self.disk.evict()
            metrics.PREFIX_EVICTIONS.labels("disk").inc(removed)
            metrics.PREFIX_BYTES.labels("disk").set(total)
        except OSError as exc:
            metrics.PREFIX_WRITE_FAILURES.inc()
            if exc.strerror not in self._warned:  # NOTE: once per cause, not per snapshot
                self._warned.add(exc.strerror or "")
                log.warning(
                    "prefix cache cannot write; serving goes on without it",
                    directory=str(self.disk.root),
                    error=exc.strerror or str(exc),
                )
        return data

    def _encode(self, state: SavedState) -> bytes:
        return encode(state, self.fingerprint, self.config.compression_level)

    def flush(self, timeout: float = 30.0) -> None:
        if not self._thread.is_alive():
            return
        done = threading.Event()
        self._hurry.set()
        self._queue.put(_FlushMark(done))
        done.wait(timeout)

    def hurry(self) -> None:
        """Write at once from now on, without waiting for the engine's quiet."""
        self._is_closing = True
        self._hurry.set()

    def close(self, timeout: float = 30.0) -> None:
        self.hurry()
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)
