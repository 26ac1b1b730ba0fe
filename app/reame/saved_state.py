"""A computed KV state and how it was computed: what the cache, the sessions and the engine all
hand each other (here, so that none of them imports another for it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class SavedState:
    """A sequence's KV state, the tokens it holds, and how they were computed: a request that
    starts with some of those tokens may go on from it as far as that stays exact
    (engine/exact_reuse.py)."""

    tokens: tuple[int, ...]
    data: bytes | bytearray  # never changed once made
    # where its prompt's chunks ended and the chunks that computed it, as far as known (a state
    # read from a file that does not say is known to be exact at its whole length only)
    chunk_ends: tuple[int, ...] = ()
    chunks: tuple[tuple[int, int], ...] = ()
    # the tokens of the prompt that computed it (those after it: an answer, computed a token
    # at a time); 0: all of them
    num_prompt: int = 0
    session: str = ""  # the session whose turn left it ("" for none): it goes on anywhere in it

    @property
    def num_bytes(self) -> int:
        return len(self.data)

    @property
    def prompt_length(self) -> int:
        return self.num_prompt or len(self.tokens)

    @property
    def known_ends(self) -> tuple[int, ...]:
        """Where its chunks ended: at least its whole length."""
        return self.chunk_ends or (len(self.tokens),)

    def common_length(self, tokens: Sequence[int]) -> int:
        """How many leading tokens this state shares with `tokens`."""
        return common_length(self.tokens, tokens)


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two token sequences share."""
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common


@dataclass(slots=True, frozen=True)
class Stored:
    """A stored state a worker thread found for a request (cache/prefix_reuse.py), and where:
    the engine decides how much of it the request goes on from (engine/reuse_index.py)."""

    tier: str  # "pinned", "ram", "disk" or "shared"
    state: SavedState
