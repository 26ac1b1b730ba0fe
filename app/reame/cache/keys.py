"""Prefix keys: chained hashes of fixed token blocks. Pure.

A prefix of L tokens is filed under the chain hash of its whole blocks (its *group*) and named
by a hash of all L tokens (its *key*), so a lookup walks a prompt's groups from the longest down
and only looks inside the groups the prompt actually has. A hash match is never trusted alone:
the stored token ids are compared before a state is used.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence

BLOCK_TOKENS = 32
_ROOT = b"reame-prefix-v1"


def _link(previous: bytes, tokens: Sequence[int]) -> bytes:
    return hashlib.blake2b(previous + array("i", tokens).tobytes(), digest_size=16).digest()


def group_chain(tokens: Sequence[int], scope: str = "") -> list[str]:
    """chain[k] names the group of prefixes with k whole blocks (k = 0 .. len // BLOCK). A
    `scope` (a bearer key's digest, when prefixes are kept per key) starts another chain: the
    same tokens under two scopes share no group and no key."""
    h = _ROOT if not scope else _link(_ROOT + scope.encode(), ())
    out = [h.hex()[:32]]
    for start in range(0, len(tokens) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        h = _link(h, tokens[start : start + BLOCK_TOKENS])
        out.append(h.hex())
    return out


def prefix_key(chain: Sequence[str], tokens: Sequence[int], length: int) -> str:
    """The key of tokens[:length], from the prompt's chain (which must reach length's group)."""
    whole = length // BLOCK_TOKENS
    tail = tokens[whole * BLOCK_TOKENS : length]
    return _link(bytes.fromhex(chain[whole]) + length.to_bytes(4, "little"), tail).hex()


def group_of(length: int) -> int:
    return length // BLOCK_TOKENS
