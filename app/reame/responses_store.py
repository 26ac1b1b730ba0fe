"""Stored responses of the Responses API: each one's conversation (the chat messages up to its
answer, its instructions apart) and the response itself, a file each under the state
directory, so a call chained by `previous_response_id` sends only what is new, across restarts.

A response belongs to the key that made it (`owner`): under another key its id is unknown.
Bounded in count and in bytes, and per key (a key past its share loses its own least recently
used, nobody else's). A file read back is checked (its checksum, its id, its owner) before it is
trusted; one that does not check out is a miss. Used from the event loop's worker threads, so
every use holds one lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from reame.cache.private_files import make_dirs, write_atomic

log = structlog.get_logger("reame.responses")

_ID = re.compile(r"^resp_[0-9a-f]{24,64}$")
_UNKEYED = "_"  # the directory of a server without keys


@dataclass(slots=True, frozen=True)
class Stored:
    response_id: str
    chain: str  # the first response's id of its chain: the conversation's state is kept by it
    conversation: list[dict[str, Any]]
    response: dict[str, Any]


def _checksum(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseStore:
    def __init__(
        self, root: Path, max_count: int, max_bytes: int, max_per_owner: int | None = None
    ) -> None:
        """`max_per_owner`: responses one key may hold (None: no such bound; the unkeyed owner
        "" is never bound)."""
        self.root, self.max_count, self.max_bytes = root, max_count, max_bytes
        self.max_per_owner = max_per_owner
        self._lock = threading.Lock()
        # (owner directory, id) -> bytes, least recently used first
        self._index: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._scan()

    def __len__(self) -> int:
        return len(self._index)

    @property
    def num_bytes(self) -> int:
        return sum(self._index.values())

    def put(self, stored: Stored, owner: str) -> bool:
        """Keep it (False: larger than the whole budget, or the disk refused; it is not kept)."""
        record = {
            "id": stored.response_id,
            "owner": owner,
            "chain": stored.chain,
            "conversation": stored.conversation,
            "response": stored.response,
        }
        data = json.dumps(
            record | {"sha256": _checksum(record)}, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8", "surrogatepass")
        if self.max_count == 0 or len(data) > self.max_bytes:
            return False
        where = _directory(owner)
        with self._lock:
            try:
                make_dirs(self.root / where)
                write_atomic(self._path(where, stored.response_id), data)
            except OSError as exc:
                log.warning("a response not stored", error=str(exc))
                return False
            key = (where, stored.response_id)
            self._index[key] = len(data)
            self._index.move_to_end(key)
            self._evict(where, keep=key)
        return True

    def get(self, response_id: str, owner: str) -> Stored | None:
        if not _ID.match(response_id):
            return None
        where = _directory(owner)
        key = (where, response_id)
        with self._lock:
            if key not in self._index:
                return None
            try:
                record = json.loads(self._path(where, response_id).read_bytes())
            except (OSError, ValueError):
                record = None
            stored = _checked(record, response_id, owner)
            if stored is None:
                log.warning("a stored response does not check out: a miss", id=response_id)
                return None
            self._index.move_to_end(key)
            with contextlib.suppress(OSError):  # NOTE: the order of use survives a restart
                os.utime(self._path(where, response_id))
            return stored

    def delete(self, response_id: str, owner: str) -> bool:
        if not _ID.match(response_id):
            return False
        key = (_directory(owner), response_id)
        with self._lock:
            if self._index.pop(key, None) is None:
                return False
            self._path(*key).unlink(missing_ok=True)
            return True

    def _path(self, where: str, response_id: str) -> Path:
        return self.root / where / f"{response_id}.json"

    def _scan(self) -> None:
        """What an earlier run kept, oldest used first (checked when read)."""
        found = []
        for path in self.root.glob("*/resp_*.json"):
            try:
                stat = path.stat()
            except OSError:
                continue
            found.append((stat.st_mtime, (path.parent.name, path.stem), stat.st_size))
        for _, key, size in sorted(found):
            self._index[key] = size

    def _evict(self, where: str, keep: tuple[str, str]) -> None:
        if self.max_per_owner is not None and where != _UNKEYED:
            own = [k for k in self._index if k[0] == where and k != keep]
            for key in own[: max(0, len(own) + 1 - self.max_per_owner)]:
                self._drop(key)
        for key in list(self._index):
            if len(self._index) <= self.max_count and self.num_bytes <= self.max_bytes:
                return
            if key != keep:
                self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        del self._index[key]
        try:
            self._path(*key).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("a stored response not deleted", error=str(exc))


def _directory(owner: str) -> str:
    return owner or _UNKEYED


def _checked(record: object, response_id: str, owner: str) -> Stored | None:
    if not isinstance(record, dict):
        return None
    claimed = record.pop("sha256", None)
    if claimed != _checksum(record) or record.get("id") != response_id:
        return None
    if record.get("owner") != owner:
        return None
    conversation, response = record.get("conversation"), record.get("response")
    if not isinstance(conversation, list) or not isinstance(response, dict):
        return None
    return Stored(response_id, str(record.get("chain", "")), conversation, response)
