"""The token ids of the stored states, found by the longest prefix they share with a prompt, not
only when a whole state is a prefix of it. Pure; thread-safe.

A radix tree over blocks of BLOCK_TOKENS tokens whose edges are the chained block hashes of
cache/keys.py: a state is filed under the hash of each of its whole blocks, so the deepest block
a prompt shares with any state is found by walking the prompt's own chain, and the states filed
there are compared token by token past it. llama-server's host-memory prompt cache finds a
cached prompt by its longest common prefix the same way (by a scan); a state found so is
restored and cut back where the engine's exactness rule allows (engine/slots.py).
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from reame.cache.keys import BLOCK_TOKENS
from reame.saved_state import common_length


@dataclass(slots=True, frozen=True)
class Entry:
    key: str
    group: str  # where its tier files it (cache/keys.py)
    tokens: array  # int32 ids: a 2k-token state costs 8 KB here


@dataclass(slots=True, frozen=True)
class Shared:
    entry: Entry
    length: int  # leading tokens it shares with the prompt


class PrefixIndex:
    def __init__(self, max_entries: int = 8192) -> None:
        """At most `max_entries` states, the least recently added or found out first (the
        tiers evict on their own budgets; an entry whose state is gone is dropped when found)."""
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[Entry, tuple[str, ...]]] = OrderedDict()
        self._under: dict[str, set[str]] = {}  # a block chain hash -> keys of states holding it
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, key: str, group: str, chain: Sequence[str], tokens: Sequence[int]) -> None:
        """File a stored state: `chain` is group_chain(tokens, scope), `group` and `key` name
        it in its tier."""
        blocks = tuple(chain[1 : len(tokens) // BLOCK_TOKENS + 1])
        entry = Entry(key, group, array("i", tokens))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return
            self._entries[key] = (entry, blocks)
            for block in blocks:
                self._under.setdefault(block, set()).add(key)
            while len(self._entries) > self.max_entries:
                self._drop(next(iter(self._entries)))

    def tokens_of(self, key: str) -> array | None:
        """The token ids a state is filed by; None if it is not."""
        with self._lock:
            filed = self._entries.get(key)
        return filed[0].tokens if filed is not None else None

    def discard(self, key: str) -> None:
        """Forget a state (its tier let it go, or it did not check out)."""
        with self._lock:
            if key in self._entries:
                self._drop(key)

    def longest(self, chain: Sequence[str], tokens: Sequence[int], limit: int = 4) -> list[Shared]:
        """The states sharing the most leading tokens with `tokens` (at least one whole block),
        longest first, at most `limit`; `chain` is group_chain(tokens, scope), so a state of
        another scope is never found."""
        with self._lock:
            depth = 0
            for k in range(1, len(chain)):
                if chain[k] not in self._under:
                    break
                depth = k
            if depth == 0:
                return []
            found = [self._entries[key][0] for key in self._under[chain[depth]]]
            for entry in found:
                self._entries.move_to_end(entry.key)
        start = depth * BLOCK_TOKENS
        shared = [Shared(e, start + common_length(e.tokens[start:], tokens[start:])) for e in found]
        shared.sort(key=lambda s: (s.length, -len(s.entry.tokens)), reverse=True)
        return shared[:limit]

    def _drop(self, key: str) -> None:
        _, blocks = self._entries.pop(key)
        for block in blocks:
            keys = self._under[block]
            keys.discard(key)
            if not keys:
                del self._under[block]
