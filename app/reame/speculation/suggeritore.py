"""Il Suggeritore: the form of what is being written, suggested as draft text. Pure, model-free.

It never suggests content, only structure the text so far has set up (structure_lines: the
next number or marker of a list, a line template the text keeps repeating with its counters
moved on, a table's separator row and the end of its rows; structure_json: the keys, layout
and counters of the earlier objects of a JSON array, the separator to the next object). The
model accepts or refuses the suggestion in its verify batch like any other draft, so it never
changes what is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reame.speculation.structure_json import next_in_json
from reame.speculation.structure_lines import next_in_line

TAIL_CHARS = 2000  # how far back the structure is looked for


def suggest(text: str) -> str:
    """The structural text likely to come next after `text`, or "" when there is none: the
    longer of what the lines and what a JSON array set up."""
    text = text[-TAIL_CHARS:]
    return max(next_in_line(text), next_in_json(text), key=len)


class Suggeritore:
    """A sequence's drafter: suggestions after the text the sequence has generated, tokenized
    by the model's own tokenizer. The text is decoded as the sequence grows, a token once."""

    name = "suggeritore"
    runs_a_model = False

    def __init__(
        self, piece: Callable[[int], bytes], tokenize: Callable[[str], list[int]], num_prompt: int
    ) -> None:
        self._piece, self._tokenize, self._num_prompt = piece, tokenize, num_prompt
        self._generated: list[int] = []  # the tokens decoded so far, after the prompt
        self._text = b""

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        text = self._generated_text(history)
        # NOTE: without its trailing space: both tokenizers here join a space to the word after
        hint = suggest(text).rstrip(" ")
        return self._tokenize(hint)[:k] if hint else []

    def observe(self, proposed: int, accepted: int) -> None:
        return None

    def _generated_text(self, history: Sequence[int]) -> str:
        """The generated text's last TAIL_CHARS or so, from a line's start where it is cut (a
        window that starts inside a JSON string would read its structure inside out)."""
        new = history[self._num_prompt :]
        done = self._generated
        if len(new) < len(done) or (done and new[len(done) - 1] != done[-1]):
            done.clear()  # NOTE: history only grows between proposals; this is a safety net
            self._text = b""
        self._text += b"".join(self._piece(t) for t in new[len(done) :])
        done.extend(new[len(done) :])
        if len(self._text) > 2 * TAIL_CHARS:
            self._text = self._text[-TAIL_CHARS:]
        text = self._text[-TAIL_CHARS:].decode("utf-8", "replace")
        if len(self._text) > TAIL_CHARS and "\n" in text:
            text = text[text.index("\n") + 1 :]
        return text
