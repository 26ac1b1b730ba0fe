"""Tokenizing a prompt in pieces, each starting at a turn marker, and remembering the long ones.

A chat prompt repeats what earlier requests sent (a system prompt, a conversation's earlier turns):
tokenizing 1.5k words again costs about 3 ms a request. llama.cpp splits text at special tokens
before it tokenizes it, so a piece that starts with one (`<|im_start|>`, `<start_of_turn>`)
tokenizes alone exactly as it does inside the whole prompt.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

Tokenize = Callable[[str, bool], list[int]]  # (text, add_special) -> token ids

# what a chat template's markers look like: <|im_start|>, <start_of_turn>, <|eot_id|>
_MARKER = re.compile(r"<[|\w][^<>\s]{0,38}>")


def marker_candidates(template_source: str) -> list[str]:
    """Texts in a chat template that may be turn markers (the model's vocabulary decides)."""
    return sorted(set(_MARKER.findall(template_source)))


class SegmentTokenizer:
    """Tokenizes like `tokenize(text, True)`, in pieces cut before each marker; pieces of at
    least `min_chars` are remembered (least recently used first out, at most `max_pieces` and
    `max_bytes`: a piece's characters plus 4 bytes a token; one piece larger than that is not
    kept)."""

    def __init__(
        self,
        tokenize: Tokenize,
        markers: Iterable[str],
        min_chars: int = 512,
        max_pieces: int = 256,
        max_bytes: int = 32 << 20,
    ) -> None:
        self._tokenize = tokenize
        found = sorted(set(markers), key=len, reverse=True)
        self._split = re.compile("(?=" + "|".join(map(re.escape, found)) + ")") if found else None
        self._min_chars, self._max_pieces, self._max_bytes = min_chars, max_pieces, max_bytes
        self._bytes = 0
        self._pieces: OrderedDict[tuple[str, bool], tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def __call__(self, text: str) -> list[int]:
        if self._split is None or not text:
            return self._tokenize(text, True)
        out: list[int] = []
        for i, piece in enumerate(p for p in self._split.split(text) if p):
            out.extend(self._piece(piece, i == 0))
        return out

    def _piece(self, text: str, add_special: bool) -> tuple[int, ...] | list[int]:
        if len(text) < self._min_chars:
            return self._tokenize(text, add_special)
        key = (text, add_special)
        with self._lock:
            tokens = self._pieces.get(key)
            if tokens is not None:
                self._pieces.move_to_end(key)
                self.hits += 1
                return tokens
        tokens = tuple(self._tokenize(text, add_special))
        size = piece_bytes(text, tokens)
        if size > self._max_bytes:
            return tokens
        with self._lock:
            if key not in self._pieces:
                self._pieces[key] = tokens
                self._bytes += size
            while len(self._pieces) > self._max_pieces or self._bytes > self._max_bytes:
                (old_text, _), old_tokens = self._pieces.popitem(last=False)
                self._bytes -= piece_bytes(old_text, old_tokens)
        return tokens

    @property
    def num_bytes(self) -> int:
        """What the remembered pieces are counted as (characters, and 4 bytes a token)."""
        return self._bytes


def piece_bytes(text: str, tokens: tuple[int, ...]) -> int:
    return len(text) + 4 * len(tokens)
