"""A sequence's thought in the engine: where it stands (engine side of thinking/split.py), how
many tokens it took, and the grammar that waits for its end.

The engine closes a thought itself, writing the template's closing run as known tokens (they
go into the next step together, as a grammar's forced tokens do), when its budget is spent and
when the model ends its answer inside it: an answer that ends by itself always has content.
"""

from __future__ import annotations

import codecs

from reame.engine.request import ThoughtSpec
from reame.grammar.matcher import Constraint
from reame.thinking.split import Phase, Split, ThoughtSplit


class Thought:
    def __init__(self, spec: ThoughtSpec, grammar: Constraint | None) -> None:
        self.spec = spec
        self._split = ThoughtSplit(spec.open, spec.close, spec.is_open)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._markers = dict(spec.marker_ids)
        self.num_tokens = 0  # taken inside the thought (the engine's closing run not counted)
        self.is_closing = False  # the engine is writing the closing run
        self.deferred = grammar  # applies from the thought's end

    @property
    def phase(self) -> Phase:
        return self._split.phase

    @property
    def is_thinking(self) -> bool:
        return self._split.phase is Phase.THINKING

    @property
    def is_settled(self) -> bool:
        """The answer has begun: its text no longer needs the split."""
        return self._split.phase is Phase.ANSWER and self._split.has_answer

    @property
    def awaits_answer(self) -> bool:
        """The thought closed and no word of the answer came yet: it may not end here."""
        return self._split.phase is Phase.ANSWER and not self._split.has_answer

    @property
    def is_spent(self) -> bool:
        """Its budget is used up: the engine closes it now."""
        budget = self.spec.budget
        return (
            budget is not None
            and self.is_thinking
            and not self.is_closing
            and self.num_tokens >= budget
        )

    def push(self, token: int, piece: bytes) -> tuple[Split, bool]:
        """The token's text split into thought and answer, and whether it is the thought's."""
        before = self._split.phase
        marker = self._markers.get(token)
        text = marker if marker is not None else self._decoder.decode(piece)
        split = self._split.feed(text)
        if before is Phase.THINKING and not self.is_closing:
            self.num_tokens += 1
        return split, Phase.THINKING in (before, self._split.phase)

    def finish(self) -> Split:
        return self._split.finish()
