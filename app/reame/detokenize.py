"""Incremental detokenization: token byte pieces in, text deltas out.

A UTF-8 character split across tokens is held until it is whole, and text that could still be
the start of a stop string is held back until it can no longer match.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Delta:
    text: str
    is_stopped: bool = False


def held_back_length(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
    longest = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:size]):
                longest = size
                break
    return longest


class TextStream:
    """One sequence's text. `push` each token's bytes; `finish` once at the end."""

    def __init__(self, stops: Sequence[str] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = tuple(stops)
        self._pending = ""
        self._is_stopped = False
        self.stopped_by: str | None = None  # the stop string that ended the text
        self.text = ""

    def push(self, piece: bytes) -> Delta:
        return self.push_text(self._decoder.decode(piece))

    def push_text(self, text: str) -> Delta:
        """Text already decoded (an answer's first words, told apart from its thought)."""
        if self._is_stopped:
            return Delta("", True)
        self._pending += text
        if self._stops:
            found = [(i, s) for s in self._stops if (i := self._pending.find(s)) >= 0]
            if found:
                cut, self.stopped_by = min(found)
                self._is_stopped = True
                return self._emit(self._pending[:cut], "", True)
        keep = held_back_length(self._pending, self._stops) if self._stops else 0
        split = len(self._pending) - keep
        return self._emit(self._pending[:split], self._pending[split:], False)

    def finish(self) -> str:
        """Everything still held back (a stop prefix that never completed, a broken UTF-8 tail)."""
        if self._is_stopped:
            return ""
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        self.text += tail
        return tail

    def _emit(self, out: str, rest: str, is_stopped: bool) -> Delta:
        self._pending = rest
        self.text += out
        return Delta(out, is_stopped)
