"""Prompt lookup: drafts from the sequence's own text. When its last few tokens occurred
earlier in the prompt or the answer, what followed them then is proposed now (quoting, code
edits, lists and JSON repeat themselves)."""

from __future__ import annotations

from collections.abc import Sequence

SIZES = (4, 3, 2)  # longer n-grams first: a longer match is a better guess


class ContextLookup:
    """One sequence's drafter; indexes its history incrementally as it grows."""

    name = "context"
    runs_a_model = False

    def __init__(self) -> None:
        self._last: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in SIZES}
        self._indexed = 0  # tokens of the history indexed so far

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        return self.continue_after(history, [], k)

    def continue_after(self, history: Sequence[int], drafts: list[int], k: int) -> list[int]:
        """What followed, earlier in the history, the n-gram that `drafts` (put after the
        history, not yet verified) end with; the drafts are looked up, never indexed."""
        if k <= 0:
            return []
        self._index(history, upto=len(history) - 1)  # NOTE: not the newest n-gram itself
        text = [*history[-max(SIZES) :], *drafts] if drafts else history
        for n in SIZES:
            if len(text) <= n:
                continue
            start = self._last[n].get(tuple(text[-n:]))
            if start is not None:
                return list(history[start : min(start + k, len(history))])
        return []

    def observe(self, proposed: int, accepted: int) -> None:
        pass  # nothing to learn: the index follows the history

    def _index(self, history: Sequence[int], upto: int) -> None:
        """Record, for every n-gram ending before position `upto`, where its follower starts."""
        for end in range(max(self._indexed, 1), upto + 1):
            for n, table in self._last.items():
                if end >= n:
                    table[tuple(history[end - n : end])] = end
        self._indexed = max(self._indexed, upto + 1)
