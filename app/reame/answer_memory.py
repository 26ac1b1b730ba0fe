"""The answer memory: the answers of determined requests (greedy, or seeded), each a checked file
under the state directory by its key (api/answer_key.py), so that the same request asked again
is answered without decoding (api/remembered.py reads and writes the records).

Files live under a directory of the model file's path; when the fingerprint there changes (the
model file, the llama.cpp build, the KV layout or the CPU backend), every answer of the old one
is dropped. Bounded in bytes (least recently used first) and, under per-key tenancy, per key.
With a shared tier, an answer is offered to it signed, and a miss here is looked up there (its
signature, then its checksum, name and owner checked) before it counts as a miss.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import structlog

from reame import metrics
from reame.cache.private_files import make_dirs, write_atomic
from reame.cache.shared_store import SharedStore
from reame.checked_files import CheckedFiles

log = structlog.get_logger("reame.answers")

_KEY = re.compile(r"^[0-9a-f]{64}$")
_FINGERPRINT = "fingerprint"
SHARED_TTL_SECONDS = 7 * 24 * 3600  # NOTE: the tier evicts by LRU too; this bounds the stale


class AnswerMemory:
    def __init__(
        self,
        root: Path,
        model_path: Path,
        fingerprint: str,
        max_bytes: int,
        max_owner_bytes: int | None = None,
        shared: SharedStore | None = None,
    ) -> None:
        where = root / hashlib.sha256(str(model_path).encode()).hexdigest()[:16]
        _forget_other_models(where, fingerprint)
        self.max_bytes = max_bytes
        self._files = CheckedFiles(
            where, _KEY, max_count=1 << 30, max_bytes=max_bytes, max_owner_bytes=max_owner_bytes
        )
        self._shared = shared
        # NOTE: offered, not yet on disk: the same request sent again at once is a hit too
        self._pending: dict[tuple[str, str], dict[str, Any]] = {}
        self._pending_lock = threading.Lock()
        metrics.ANSWER_BYTES.set(self._files.num_bytes)

    def __len__(self) -> int:
        return len(self._files)

    def recall(self, key: str, owner: str) -> dict[str, Any] | None:
        """The record kept as `key` for `owner`, checked; None: a miss. Off the event loop."""
        with self._pending_lock:
            record = self._pending.get((owner, key))
        record = record or self._files.get(key, owner)
        if record is not None:
            metrics.ANSWER_LOOKUPS.labels("hit").inc()
            return record
        if self._shared is not None and (data := self._shared.answer(key, self.max_bytes)):
            record = self._files.decode(data, key, owner)
            if record is not None:
                self._files.put_encoded(key, owner, data)
                metrics.ANSWER_LOOKUPS.labels("hit_shared").inc()
                metrics.ANSWER_BYTES.set(self._files.num_bytes)
                return record
            log.warning("a shared answer does not check out: a miss", key=key)
        metrics.ANSWER_LOOKUPS.labels("miss").inc()
        return None

    def offer(self, key: str, owner: str, record: dict[str, Any]) -> None:
        """A determined answer's record, found by `recall` from now on; `keep` then writes it."""
        with self._pending_lock:
            self._pending[(owner, key)] = record

    def keep(self, key: str, owner: str, record: dict[str, Any]) -> bool:
        """Keep a determined answer's record (False: too large, or the disk refused). Off the
        event loop."""
        data = self._files.encode(key, owner, record)
        is_kept = self._files.put_encoded(key, owner, data)
        with self._pending_lock:
            self._pending.pop((owner, key), None)
        if not is_kept:
            metrics.ANSWER_KEPT.labels("refused").inc()
            return False
        metrics.ANSWER_KEPT.labels("kept").inc()
        metrics.ANSWER_BYTES.set(self._files.num_bytes)
        if self._shared is not None:
            self._shared.keep_answer(key, data, SHARED_TTL_SECONDS)
        return True


def _forget_other_models(where: Path, fingerprint: str) -> None:
    """Drop what was kept for another model file at this path (or another build, KV layout,
    backend); note whose answers the directory holds now."""
    mark = where / _FINGERPRINT
    try:
        if mark.read_text() == fingerprint:
            return
    except OSError:
        pass
    if where.exists():
        log.info("the model changed: its remembered answers are dropped", directory=str(where))
        shutil.rmtree(where, ignore_errors=True)
    try:
        make_dirs(where)
        write_atomic(mark, fingerprint.encode())
    except OSError as exc:
        # NOTE: debug: `reame serve` reports an unwritable state directory once (preflight.py)
        log.debug("the answer memory's directory could not be marked", error=str(exc))
