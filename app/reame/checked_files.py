"""Records kept as files, a file each under a directory per owner, each with a checksum: the
stored responses (responses_store.py) and the answer memory (api/answer_memory.py).

A record belongs to the key that wrote it (`owner`): under another key its name is unknown.
Bounded in count and in bytes, and per owner in count or bytes (an owner past its share loses
its own least recently used, nobody else's). A file read back is checked (its sha256, its name,
its owner) before it is trusted; one that does not check out is a miss. The order of use
survives a restart (mtime). Used from the event loop's worker threads, so every use holds one
lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import structlog

from reame.cache.private_files import make_dirs, write_atomic

log = structlog.get_logger("reame.files")

UNKEYED = "_"  # the directory of a server without keys


def checksum(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


class CheckedFiles:
    def __init__(
        self,
        root: Path,
        names: re.Pattern[str],
        max_count: int,
        max_bytes: int,
        max_per_owner: int | None = None,
        max_owner_bytes: int | None = None,
        name_field: str = "name",
    ) -> None:
        """`names`: what a record's name may be (it is a file name). `max_per_owner`,
        `max_owner_bytes`: what one key may hold (None: no such bound; the unkeyed owner "" is
        never bound). `name_field`: the record's field that holds its name."""
        self.root, self.names = root, names
        self.max_count, self.max_bytes = max_count, max_bytes
        self.max_per_owner, self.max_owner_bytes = max_per_owner, max_owner_bytes
        self._name_field = name_field
        self._lock = threading.Lock()
        # (owner directory, name) -> bytes, least recently used first
        self._index: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._total = 0  # bytes of all of them
        self._scan()

    def __len__(self) -> int:
        return len(self._index)

    @property
    def num_bytes(self) -> int:
        return self._total

    def encode(self, name: str, owner: str, record: dict[str, Any]) -> bytes:
        """The file's bytes of `record` as `name` of `owner`."""
        record = {self._name_field: name, "owner": owner, **record}
        return json.dumps(
            record | {"sha256": checksum(record)}, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8", "surrogatepass")

    def decode(self, data: bytes, name: str, owner: str) -> dict[str, Any] | None:
        """The record of a file's bytes if it checks out (read here, or from another machine
        whose signature was checked)."""
        try:
            record = json.loads(data)
        except ValueError:
            return None
        return record if self._checks_out(record, name, owner) else None

    def put(self, name: str, owner: str, record: dict[str, Any]) -> bool:
        """Keep `record` as `name` of `owner` (False: larger than the whole budget, or the disk
        refused; it is not kept)."""
        return self.put_encoded(name, owner, self.encode(name, owner, record))

    def put_encoded(self, name: str, owner: str, data: bytes) -> bool:
        if self.max_count == 0 or len(data) > self.max_bytes or not self.names.match(name):
            return False
        where = owner or UNKEYED
        with self._lock:
            try:
                make_dirs(self.root / where)
                write_atomic(self._path(where, name), data)
            except OSError as exc:
                log.warning("a record not stored", root=str(self.root), error=str(exc))
                return False
            key = (where, name)
            self._total += len(data) - self._index.get(key, 0)
            self._index[key] = len(data)
            self._index.move_to_end(key)
            self._evict(where, keep=key)
        return True

    def get(self, name: str, owner: str) -> dict[str, Any] | None:
        """The record, checked; None if there is none or it does not check out."""
        if not self.names.match(name):
            return None
        where = owner or UNKEYED
        key = (where, name)
        with self._lock:
            if key not in self._index and not self._found(key):
                return None
            try:
                record = self.decode(self._path(where, name).read_bytes(), name, owner)
            except OSError:
                record = None
            if record is None:
                log.warning("a stored record does not check out: a miss", name=name)
                self._drop(key)
                return None
            self._index.move_to_end(key)
            with contextlib.suppress(OSError):  # NOTE: the order of use survives a restart
                os.utime(self._path(where, name))
            return record

    def delete(self, name: str, owner: str) -> bool:
        if not self.names.match(name):
            return False
        key = (owner or UNKEYED, name)
        with self._lock:
            if key not in self._index:
                return False
            self._drop(key)
            return True

    def _found(self, key: tuple[str, str]) -> bool:
        """A file another process sharing the directory wrote since: indexed as used now."""
        try:
            size = self._path(*key).stat().st_size
        except OSError:
            return False
        self._index[key] = size
        self._total += size
        return True

    def _checks_out(self, record: object, name: str, owner: str) -> bool:
        if not isinstance(record, dict):
            return False
        claimed = record.pop("sha256", None)
        return (
            claimed == checksum(record)
            and record.get(self._name_field) == name
            and record.get("owner") == owner
        )

    def _path(self, where: str, name: str) -> Path:
        return self.root / where / f"{name}.json"

    def _scan(self) -> None:
        """What an earlier run kept, oldest used first (checked when read)."""
        found = []
        for path in self.root.glob("*/*.json"):
            if not self.names.match(path.stem):
                continue
            try:
                stat = path.stat()
            except OSError:
                continue
            found.append((stat.st_mtime, (path.parent.name, path.stem), stat.st_size))
        for _, key, size in sorted(found):
            self._index[key] = size
            self._total += size
        with self._lock:
            self._evict("", keep=None)

    def _evict(self, where: str, keep: tuple[str, str] | None) -> None:
        if where and where != UNKEYED:
            own = [k for k in self._index if k[0] == where and k != keep]
            if self.max_per_owner is not None:
                for key in own[: max(0, len(own) + 1 - self.max_per_owner)]:
                    self._drop(key)
            if self.max_owner_bytes is not None:
                held = sum(self._index[k] for k in self._index if k[0] == where)
                for key in [k for k in own if k in self._index]:
                    if held <= self.max_owner_bytes:
                        break
                    held -= self._index[key]
                    self._drop(key)
        for key in list(self._index):
            if len(self._index) <= self.max_count and self._total <= self.max_bytes:
                return
            if key != keep:
                self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        self._total -= self._index.pop(key)
        try:
            self._path(*key).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("a stored record not deleted", error=str(exc))
