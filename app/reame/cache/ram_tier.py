"""SavedStates in host memory within a byte budget, least recently used out first. Thread-safe:
the engine thread offers, lookups run in worker threads.

The prefix cache refreshes the stored prefixes of every state it uses or keeps (`touch`), so a
shared prefix (a system prompt) is never let go before the longer states built on it, as a
radix tree evicts its leaves first: a conversation's turns each add a state, and under a plain
LRU they pushed out the system prompt's, which no request looked up while they went on."""

from __future__ import annotations

import threading
from collections import OrderedDict

from reame.saved_state import SavedState


class RamTier:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, SavedState] = OrderedDict()
        self._groups: dict[str, dict[str, int]] = {}  # group -> key -> length
        self._group_of: dict[str, str] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions = 0

    @property
    def num_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def entries(self, group: str) -> list[tuple[int, str]]:
        with self._lock:
            return [(length, key) for key, length in self._groups.get(group, {}).items()]

    def get(self, key: str) -> SavedState | None:
        with self._lock:
            snap = self._items.get(key)
            if snap is not None:
                self._items.move_to_end(key)
            return snap

    def touch(self, keys: list[str]) -> None:
        """Mark these as just used, in this order (the last one most recently)."""
        with self._lock:
            for key in keys:
                if key in self._items:
                    self._items.move_to_end(key)

    def contains(self, key: str) -> bool:
        with self._lock:
            return key in self._items

    def holds(self, key: str, snap: SavedState) -> bool:
        """Whether this very state is kept under `key` (not a copy: its memory is RAM's)."""
        with self._lock:
            return self._items.get(key) is snap

    def put(self, group: str, key: str, snap: SavedState) -> None:
        size = len(snap.data)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return
            self._items[key] = snap
            self._groups.setdefault(group, {})[key] = len(snap.tokens)
            self._group_of[key] = group
            self._bytes += size
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._items)))
                self.evictions += 1

    def discard(self, key: str) -> None:
        """Let go of a state (a longer one kept serves it)."""
        with self._lock:
            if key in self._items:
                self._drop(key)

    def clear(self) -> None:
        with self._lock:
            for key in list(self._items):
                self._drop(key)

    def _drop(self, key: str) -> None:
        snap = self._items.pop(key)
        self._bytes -= len(snap.data)
        group = self._group_of.pop(key)
        members = self._groups[group]
        del members[key]
        if not members:
            del self._groups[group]
