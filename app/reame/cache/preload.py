"""At start, the snapshots on disk most recently used are loaded into RAM, within its budget, so
the first requests after a restart restore from memory, not from disk. A background thread,
which waits while the engine has work: it never stands before a request."""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from reame import metrics
from reame.cache.background import lower_this_thread
from reame.cache.disk_tier import parse_name, stored_files
from reame.cache.prefix_cache import PrefixCache

log = structlog.get_logger("reame.cache")

PAUSE_SECONDS = 0.05


class Preload:
    def __init__(self, cache: PrefixCache, is_busy: Callable[[], bool]) -> None:
        self._cache, self._is_busy = cache, is_busy
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reame-preload", daemon=True)

    def start(self) -> None:
        if self._cache.disk is not None and self._cache.ram.max_bytes > 0:
            self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Until the pass is over (for tests and benches)."""
        if self._thread.is_alive():
            self._thread.join(timeout)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        lower_this_thread()
        try:
            count = self.load()
        except Exception:  # NOTE: a preload that fails leaves the disk tier to serve as ever
            log.exception("prefix cache preload failed")
            return
        if count:
            log.info("prefix cache preloaded", snapshots=count)

    def load(self) -> int:
        """Load snapshots, most recently used first, until RAM would pass its budget; each is
        checked as a disk hit is (a file that does not check out is removed). The count."""
        cache = self._cache
        assert cache.disk is not None
        root = cache.disk.root / cache.disk.fingerprint
        files = sorted(stored_files(root), key=lambda f: -f.last_used)
        count = 0
        for stored in files:
            while self._is_busy() and not self._stop.is_set():
                self._stop.wait(PAUSE_SECONDS)
            if self._stop.is_set():
                break
            # NOTE: a state takes about its file's size times the zstd ratio in RAM; stop at
            # the first that would not fit rather than evict one loaded before it
            if cache.ram.num_bytes + stored.num_bytes > cache.ram.max_bytes:
                break
            named = parse_name(stored.path.name)
            # NOTE: a file sits in its group's directory (disk_tier.group_dir)
            if named is not None and cache.preload(stored.path.parent.name, *named):
                count += 1
                metrics.PREFIX_PRELOADED.inc()
        return count
