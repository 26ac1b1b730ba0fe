"""The Palimpsest's lookup: where each n-gram of its token array was followed, per size.

Per size: an NgramIndex of the whole array, built on a thread of its own and swapped in, so the
engine thread that adds an answer never waits for an archive-wide sort; plus a small dict of
what was added since the last build started (recent) and one of what was added before that and
is not in the index until the build is swapped in (frozen). A compaction moves every position:
the index is then emptied and built again, and a build under way from before it starts over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np
import structlog

from reame.speculation.ngram_index import NgramIndex, hash_of, ngram_hashes

log = structlog.get_logger("reame.palimpsest")

# n-gram lengths looked up, longest first: a long match (the end of the question and the chat
# template's "assistant" header) tells apart answers that a short one mixes up
SIZES = (8, 3)
INDEX_ENTRY_BYTES = 16  # hash u64, position i64
_RECENT_ENTRY_BYTES = 100  # a dict entry and its two ints, as CPython keeps them


class ArchiveIndex:
    """Called under the Palimpsest's lock; a build takes that lock to swap itself in, then calls
    `on_swap` (off the lock)."""

    def __init__(
        self,
        lock: threading.Lock,
        tokens: Callable[[], np.ndarray],
        on_swap: Callable[[], None],
    ) -> None:
        self._lock, self._tokens, self._on_swap = lock, tokens, on_swap
        self._indexes = {n: NgramIndex(n) for n in SIZES}
        # per size: n-gram hash -> position, for what was added since the last build started;
        # _frozen: what was added before that, until the build is swapped in
        self._recent: dict[int, dict[int, int]] = {n: {} for n in SIZES}
        self._frozen: dict[int, dict[int, int]] = {n: {} for n in SIZES}
        self._epoch = 0  # moves on with each compaction: positions of before mean nothing
        self._builder: threading.Thread | None = None

    def find(self, history: Sequence[int]) -> int:
        """Where what followed the longest n-gram that ends `history` starts; -1 if none did."""
        for n in SIZES:
            key = hash_of(history, n)
            if key is None:
                continue
            start = self._recent[n].get(key, -1)
            if start < 0:
                start = self._frozen[n].get(key, -1)
            if start < 0:
                start = self._indexes[n].find(key)
            if start < 0:
                continue
            if list(self._tokens()[start - n : start]) != list(history[-n:]):
                continue  # a hash collision, or an evicted record
            return start
        return -1

    def add(self, record: np.ndarray, base: int) -> None:
        """Index a record just placed at `base`: the n-grams ending before its last token, each
        pointing at its follower."""
        for n, recent in self._recent.items():
            hashes = ngram_hashes(record[:-1], n)
            recent.update(zip(hashes.tolist(), range(base + n, base + record.size), strict=True))

    def maybe_build(self) -> None:
        if len(self._recent[min(SIZES)]) > max(4096, self._indexes[min(SIZES)].size // 8):
            self.build()

    def build(self, background: bool = True) -> None:
        """Index the tokens as they are now, off the lock; what is added meanwhile goes on in the
        recent dicts. One build at a time (the next one is asked for by the next add, or by
        the build itself when a compaction moved everything under it)."""
        if self._builder is not None and self._builder.is_alive():
            return
        job = self._freeze()
        if not background:
            self._indexes = self._build(job[1])
            self._frozen = {n: {} for n in SIZES}
            return
        self._builder = threading.Thread(
            target=self._build_and_swap, args=job, name="reame-palimpsest-index", daemon=True
        )
        self._builder.start()

    def reset(self) -> None:
        """Every position moved (a compaction): forget them all and build again."""
        self._epoch += 1
        self._recent = {n: {} for n in SIZES}
        self._frozen = {n: {} for n in SIZES}
        self._indexes = {n: NgramIndex(n) for n in SIZES}
        self.build()

    def wait(self, timeout: float = 60.0) -> None:
        """Until the build under way (if any) is swapped in."""
        builder = self._builder
        if builder is not None:
            builder.join(timeout)

    @property
    def resident_bytes(self) -> int:
        """The indexes and the recent dicts."""
        indexes = sum(INDEX_ENTRY_BYTES * i.size for i in self._indexes.values())
        entries = sum(len(d) for d in (*self._recent.values(), *self._frozen.values()))
        return indexes + entries * _RECENT_ENTRY_BYTES

    def _freeze(self) -> tuple[int, np.ndarray]:
        """What a build indexes: the array as it is; its recent entries wait in _frozen."""
        for n in SIZES:
            self._frozen[n].update(self._recent[n])
            self._recent[n] = {}
        return self._epoch, self._tokens()

    def _build(self, tokens: np.ndarray) -> dict[int, NgramIndex]:
        built = {n: NgramIndex(n) for n in SIZES}
        for index in built.values():
            index.rebuild(tokens)
        return built

    def _build_and_swap(self, epoch: int, tokens: np.ndarray) -> None:
        try:
            while True:
                built = self._build(tokens)
                with self._lock:
                    if epoch == self._epoch:
                        self._indexes = built
                        self._frozen = {n: {} for n in SIZES}
                        break
                    epoch, tokens = self._freeze()  # a compaction moved every position: again
        except Exception:  # never let a build take the process down; the dicts still serve
            log.exception("palimpsest index build failed")
            return
        self._on_swap()
