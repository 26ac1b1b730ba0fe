"""The Palimpsest across replicas: every `interval` seconds, on its own thread (never the
engine's), this process's new records go to the shared tier and the other replicas' come back.

One sync is three round trips: append what this process wrote (and mark the segments it
sealed, remove those it evicted), list the segments, read each peer's from where it was read
last. A sealed segment read to its end is not asked for again. A tier that does not answer
skips the sync (the records wait for the next one, up to MAX_PENDING_BYTES, then the oldest are
not sent); nothing is dropped from the local archive because a listing was missing.

Each record goes to the tier signed, and a peer's are checked before the archive takes them
(palimpsest_tier.py): a segment that does not check out is set aside and counted by its reason.
A segment's sealed size is in the tier's bytes (its records with their tags).
"""

from __future__ import annotations

import threading

import structlog

from reame import metrics
from reame.cache.shared_store import SharedStore
from reame.speculation.palimpsest import Palimpsest
from reame.speculation.palimpsest_records import SEALED
from reame.speculation.palimpsest_tier import RefusedSegment, read_signed, sign_record

log = structlog.get_logger("reame.palimpsest")

MAX_PENDING_BYTES = 8 << 20


class PalimpsestSync:
    def __init__(
        self,
        archive: Palimpsest,
        store: SharedStore,
        vocab: str,
        vocab_size: int,
        interval: float = 10.0,
    ) -> None:
        self.archive, self.store, self.vocab, self.interval = archive, store, vocab, interval
        self.vocab_size = vocab_size
        archive.shares = True
        self._pending: list[tuple[str, bytes]] = []
        self._sizes: dict[str, int] = {}  # of this process's open segments, in the tier
        self._statuses: dict[str, str] = {}
        self._removed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reame-palimpsest-sync")
        self._thread.daemon = True

    def start(self) -> PalimpsestSync:
        self._thread.start()
        return self

    def sync(self) -> int:
        """One exchange; the peers' records imported."""
        records, sealed, removed = self.archive.take_exports()
        self._pending += [(name, self._signed(name, data)) for name, data in records]
        self._statuses.update({name: f"{SEALED}{self._sizes.pop(name, 0)}" for name in sealed})
        self._removed += removed
        self._bound_pending()
        if self._pending or self._statuses:
            if not self.store.append(self.vocab, self._pending, self._statuses):
                return 0
            self._pending, self._statuses = [], {}
        if self._removed:
            self.store.remove_segments(self.vocab, self._removed)
            self._removed = []
        listed = self.store.segments(self.vocab)
        if listed is None:
            return 0
        self.archive.drop_peers(listed)
        reads = list(self.archive.peer_offsets(listed).items())
        tails = self.store.tails(self.vocab, reads)
        imported = 0
        for (name, _), data in zip(reads, tails or [], strict=False):
            if data:
                imported += self._import(name, data)
        metrics.PALIMPSEST_IMPORTED.inc(imported)
        return imported

    def _signed(self, name: str, record: bytes) -> bytes:
        key = self.store.segment_key(self.vocab, name)
        signed = sign_record(self.store.mac, key, self.vocab, record)
        self._sizes[name] = self._sizes.get(name, 0) + len(signed)
        return signed

    def _import(self, name: str, data: bytes) -> int:
        key = self.store.segment_key(self.vocab, name)
        try:
            records, consumed = read_signed(data, self.store.mac, key, self.vocab, self.vocab_size)
        except RefusedSegment as exc:
            metrics.SHARED_REFUSED.labels(exc.reason).inc()
            log.warning("palimpsest segment of a peer refused", segment=name, reason=str(exc))
            self.archive.refuse_peer(name)
            return 0
        return self.archive.import_peer(name, records, consumed)

    def _bound_pending(self) -> None:
        total = sum(len(d) for _, d in self._pending)
        while self._pending and total > MAX_PENDING_BYTES:
            total -= len(self._pending.pop(0)[1])

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception:  # NOTE: a bad record or a bug must not end the syncing for good
                log.exception("palimpsest sync failed")

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.sync()  # what was written since the last one
