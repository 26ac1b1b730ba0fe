"""The persistent shared-prefix cache: the longest stored prefix of a prompt, from host memory
(RAM tier) or from disk (shared by the machine's processes), and new prefix states kept for the
requests that follow. Disk writes run on a background thread with a bounded queue."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from reame import metrics
from reame.cache.disk_tier import DiskTier
from reame.cache.keys import group_chain, group_of, prefix_key
from reame.cache.ram_tier import RamTier
from reame.cache.snapshot_format import SnapshotError, decode, encode
from reame.cache.snapshot_policy import SnapshotPolicy
from reame.engine.request import SavedState

log = structlog.get_logger("reame.cache")

_STOP = object()


@dataclass(slots=True, frozen=True)
class Hit:
    state: SavedState
    source: str  # "ram" or "disk"


@dataclass(slots=True, frozen=True)
class CacheConfig:
    directory: Path | None  # None: RAM tier only
    ram_bytes: int
    disk_bytes: int
    compression_level: int = 1
    min_tokens: int = 64
    max_snapshots: int = 4  # where snapshots go: SnapshotPolicy
    stride: int = 512
    queue_size: int = 8
    # and at most this many bytes of states waiting for the writer (a state may be tens of MB; the
    # RAM tier may have let go of a queued one, so the queue alone can hold it in memory)
    queue_bytes: int = 256 << 20
    # disk writes wait while requests compute (compressing 30 MB takes a core from the decode
    # threads of a 2-core machine), but never longer than this
    max_write_delay: float = 10.0
    write_quiet: float = 1.0


class PrefixCache:
    def __init__(self, config: CacheConfig, fingerprint: str) -> None:
        self.config, self.fingerprint = config, fingerprint
        self.policy = SnapshotPolicy(config.min_tokens, config.max_snapshots, config.stride)
        self.ram = RamTier(config.ram_bytes)
        self.disk = (
            DiskTier(config.directory, fingerprint, config.disk_bytes)
            if config.directory is not None
            else None
        )
        self._queue: queue.Queue[object] = queue.Queue(maxsize=config.queue_size)
        self._queued_bytes = 0
        self._queued_lock = threading.Lock()
        self._warned: set[str] = set()
        self._tokens = {"reused": 0, "computed": 0}
        self._writer: threading.Thread | None = None
        self._ram_evictions_seen = 0
        self._is_busy: Callable[[], bool] = lambda: False
        self._hurry = threading.Event()  # a flush or close waits: write at once
        self._is_closing = False
        if self.disk is not None:
            self.disk.remove_stale_parts()
            self._writer = threading.Thread(target=self._write_loop, name="reame-cache-writer")
            self._writer.daemon = True
            self._writer.start()

    # -- lookups (any thread) ---------------------------------------------------------------

    def lookup(self, tokens: list[int], scope: str = "") -> Hit | None:
        """The longest stored prefix of `tokens` (it may be all of them), checked token by
        token; None on a miss. Corrupt or foreign files met on the way are removed."""
        n = len(tokens)
        hit = self._find(tokens, scope) if n >= self.config.min_tokens else None
        metrics.PREFIX_LOOKUPS.labels(hit.source if hit else "miss").inc()
        return hit

    def count_tokens(self, reused: int, total: int) -> None:
        """What a request finally restored of its prompt (the engine may use less of a hit)."""
        self._tokens["reused"] += reused
        self._tokens["computed"] += total - reused
        metrics.PREFIX_TOKENS.labels("reused").inc(reused)
        metrics.PREFIX_TOKENS.labels("computed").inc(total - reused)
        looked = self._tokens["reused"] + self._tokens["computed"]
        metrics.PREFIX_HIT_RATIO.set(self._tokens["reused"] / looked if looked else 0.0)

    def _find(self, tokens: list[int], scope: str) -> Hit | None:
        chain = group_chain(tokens, scope)
        lowest = group_of(self.config.min_tokens)
        for k in range(len(chain) - 1, lowest - 1, -1):
            group = chain[k]
            for source in ("ram", "disk"):
                hit = self._find_in(source, group, chain, tokens)
                if hit is not None:
                    return hit
        return None

    def _find_in(self, source: str, group: str, chain: list[str], tokens: list[int]) -> Hit | None:
        tier = self.ram if source == "ram" else self.disk
        if tier is None:
            return None
        for length, key in sorted(tier.entries(group), reverse=True):
            if not self.config.min_tokens <= length <= len(tokens):
                continue
            if key != prefix_key(chain, tokens, length):
                continue
            state = self.ram.get(key) if source == "ram" else self._read(group, length, key)
            if state is None:
                continue
            if list(state.tokens) != tokens[:length]:
                metrics.PREFIX_REJECTED.labels("tokens").inc()
                continue
            if source == "disk":
                self.ram.put(group, key, state)
                self._publish_ram()
            return Hit(state, source)
        return None

    def _read(self, group: str, length: int, key: str) -> SavedState | None:
        assert self.disk is not None
        path = self.disk.path(group, length, key)
        data = self.disk.read(path)
        if data is None:
            return None
        try:
            return decode(data, self.fingerprint)
        except SnapshotError as exc:
            metrics.PREFIX_REJECTED.labels(exc.reason).inc()
            log.warning("prefix cache file refused", path=str(path), reason=str(exc))
            with contextlib.suppress(OSError):
                self.disk.remove(path)
            return None

    def holds(self, tokens: list[int], length: int, scope: str = "") -> bool:
        chain = group_chain(tokens[:length], scope)
        key = prefix_key(chain, tokens, length)
        if self.ram.contains(key):
            return True
        return (
            self.disk is not None and self.disk.path(chain[group_of(length)], length, key).exists()
        )

    # -- keeping states ---------------------------------------------------------------------

    def offer(self, state: SavedState, scope: str = "") -> None:
        """Keep a computed prefix state: in RAM now, on disk soon (dropped if the writer is
        behind). Called on the engine thread."""
        tokens = list(state.tokens)
        length = len(tokens)
        if length < self.config.min_tokens:
            return
        metrics.PREFIX_SNAPSHOTS.inc()
        chain = group_chain(tokens, scope)
        group, key = chain[group_of(length)], prefix_key(chain, tokens, length)
        self.ram.put(group, key, state)
        self._publish_ram()
        if self.disk is None:
            return
        size = len(state.data)
        with self._queued_lock:
            if self._queued_bytes + size > self.config.queue_bytes:
                metrics.PREFIX_WRITE_DROPS.inc()
                return
            try:
                self._queue.put_nowait((self.disk.path(group, length, key), state))
            except queue.Full:
                metrics.PREFIX_WRITE_DROPS.inc()
                return
            self._queued_bytes += size

    @property
    def queued_bytes(self) -> int:
        """Bytes of states waiting for the disk writer."""
        return self._queued_bytes

    def _publish_ram(self) -> None:
        metrics.PREFIX_BYTES.labels("ram").set(self.ram.num_bytes)
        evicted, self._ram_evictions_seen = (
            self.ram.evictions - self._ram_evictions_seen,
            self.ram.evictions,
        )
        metrics.PREFIX_EVICTIONS.labels("ram").inc(evicted)

    def defer_writes_while(self, is_busy: Callable[[], bool]) -> None:
        """Disk writes wait until `is_busy()` (the engine is computing) has been false for a
        while, up to max_write_delay."""
        self._is_busy = is_busy

    def _wait_for_quiet(self) -> None:
        """Until the engine has been idle for write_quiet seconds: a client that sends its next
        request at once (the next turn, the next question) must not meet the compression."""
        deadline = time.monotonic() + self.config.max_write_delay
        quiet_since: float | None = None
        while not self._hurry.is_set() and (now := time.monotonic()) < deadline:
            if self._is_busy():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= self.config.write_quiet:
                return
            self._hurry.wait(0.05)

    def _write_loop(self) -> None:
        assert self.disk is not None
        # NOTE: compressing and writing 30 MB must not take a core from the decode threads on a
        # 2-core machine: on Linux a thread has its own nice value
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, _FlushMark):
                if self._queue.empty() and not self._is_closing:
                    self._hurry.clear()
                item.done.set()
                continue
            path, state = item  # type: ignore[misc]
            try:
                self._write_one(path, state)
            finally:
                with self._queued_lock:
                    self._queued_bytes -= len(state.data)

    def _write_one(self, path: Path, state: SavedState) -> None:
        assert self.disk is not None
        self._wait_for_quiet()
        try:
            if not path.exists():
                self.disk.write(
                    path, encode(state, self.fingerprint, self.config.compression_level)
                )
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
        except Exception:  # never let one snapshot stop the writer
            log.exception("prefix cache write failed")

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until queued snapshots are on disk (tests, shutdown)."""
        if self._writer is None or not self._writer.is_alive():
            return
        done = threading.Event()
        self._hurry.set()
        self._queue.put(_FlushMark(done))
        done.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        self._is_closing = True
        self._hurry.set()
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(_STOP)
            self._writer.join(timeout)


@dataclass(slots=True, frozen=True)
class _FlushMark:
    done: threading.Event
