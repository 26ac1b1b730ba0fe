"""An answer's text told apart into its thought and its answer, as it is written. Pure.

The thought is what stands between the template's markers (`<think>` ... `</think>`); it may
be open from the first token (the generation prompt opened it), opened by the model at its very
start, or never come. Whitespace at the thought's ends and before the answer is the template's
framing, not the model's words, and is dropped; text that may still turn out to be a marker is
held back until it can no longer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Phase(StrEnum):
    MAYBE = "maybe"  # nothing written yet that tells whether a thought opens
    THINKING = "thinking"
    ANSWER = "answer"


@dataclass(slots=True, frozen=True)
class Split:
    reasoning: str = ""
    content: str = ""


class ThoughtSplit:
    def __init__(self, open_marker: str, close_marker: str, is_open: bool) -> None:
        self._open, self._close = open_marker, close_marker
        self.phase = Phase.THINKING if is_open else Phase.MAYBE
        self._buf = ""  # held back: may still be a marker, or trailing whitespace
        self._began_thought = self._began_answer = False

    @property
    def has_answer(self) -> bool:
        """The answer's first words are out (nothing more of it needs holding)."""
        return self._began_answer and not self._buf

    def feed(self, text: str) -> Split:
        self._buf += text
        reasoning: list[str] = []
        content: list[str] = []
        while self._buf:
            if self.phase is Phase.MAYBE and not self._maybe():
                break
            if self.phase is Phase.THINKING:
                if not self._thinking(reasoning):
                    break
                continue
            if self.phase is Phase.ANSWER:
                content.append(self._answer(self._buf))
                self._buf = ""
        return Split("".join(reasoning), "".join(content))

    def finish(self) -> Split:
        """What was held back: a thought cut short keeps its text, whitespace aside."""
        buf, self._buf = self._buf, ""
        if self.phase is Phase.THINKING:
            return Split(reasoning=self._thought(buf.rstrip()))
        return Split(content=self._answer(buf))

    def _maybe(self) -> bool:
        """False while the start may still be the opening marker."""
        head = self._buf.lstrip()
        if head.startswith(self._open):
            self._buf = head[len(self._open) :]
            self.phase = Phase.THINKING
            return True
        if not head or self._open.startswith(head):
            return False
        self.phase = Phase.ANSWER
        return True

    def _thinking(self, out: list[str]) -> bool:
        """False when the rest must wait for more text."""
        at = self._buf.find(self._close)
        if at >= 0:
            out.append(self._thought(self._buf[:at].rstrip()))
            self._buf = self._buf[at + len(self._close) :]
            self.phase = Phase.ANSWER
            return True
        held = _held_back(self._buf, self._close)
        body = self._buf[: len(self._buf) - held]
        # NOTE: whitespace before the close is the template's: held until words follow it
        kept = body.rstrip()
        self._buf = self._buf[len(kept) :]
        if kept:
            out.append(self._thought(kept))
        return False

    def _thought(self, text: str) -> str:
        if not self._began_thought:
            text = text.lstrip()
            self._began_thought = bool(text)
        return text

    def _answer(self, text: str) -> str:
        if not self._began_answer:
            text = text.lstrip()
            self._began_answer = bool(text)
        return text


def _held_back(text: str, marker: str) -> int:
    """The length of the longest end of `text` that begins `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0
