"""An index from n-grams of a token array to where each one last occurred: numpy, compact
(16 bytes an entry), a lookup is a binary search.

Positions are those of the token right after the n-gram. Entries are kept sorted by hash; among
equal hashes the later position wins (the most recent text is the best guess)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NGRAM = 3
_MULT = np.uint64(0x9E3779B97F4A7C15)
SEPARATOR = -1  # between records: no n-gram spans it, no draft runs past it


def ngram_hashes(tokens: np.ndarray, n: int = NGRAM) -> np.ndarray:
    """The hash of tokens[i - n : i] for every i in [n, len(tokens)]; n-grams that hold a
    separator hash to 0 (never looked up: a history holds no separator)."""
    if tokens.size < n:
        return np.zeros(0, dtype=np.uint64)
    t = tokens.astype(np.int64).astype(np.uint64)
    h = np.zeros(tokens.size - n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = (h ^ t[j : tokens.size - n + 1 + j]) * _MULT
    has_sep = np.zeros(h.size, dtype=bool)
    for j in range(n):
        has_sep |= tokens[j : tokens.size - n + 1 + j] == SEPARATOR
    h[has_sep] = 0
    return h


def hash_of(history: Sequence[int], n: int = NGRAM) -> int | None:
    if len(history) < n:
        return None
    return int(ngram_hashes(np.asarray(history[-n:], dtype=np.int32), n)[0])


class NgramIndex:
    """Sorted (hash, position) pairs of the n-grams of one token array."""

    def __init__(self, n: int = NGRAM) -> None:
        self.n = n
        self._hashes = np.zeros(0, dtype=np.uint64)
        self._positions = np.zeros(0, dtype=np.int64)

    @property
    def size(self) -> int:
        return int(self._hashes.size)

    def rebuild(self, tokens: np.ndarray) -> None:
        h = ngram_hashes(tokens, self.n)
        positions = np.arange(self.n, self.n + h.size, dtype=np.int64)
        keep = h != 0
        h, positions = h[keep], positions[keep]
        order = np.argsort(h, kind="stable")  # NOTE: stable: equal hashes stay in text order
        self._hashes, self._positions = h[order], positions[order]

    def find(self, key: int) -> int:
        """Where the text that last followed this n-gram starts, or -1."""
        k = np.uint64(key)
        end = int(np.searchsorted(self._hashes, k, side="right"))
        if end == 0 or self._hashes[end - 1] != k:
            return -1
        return int(self._positions[end - 1])
