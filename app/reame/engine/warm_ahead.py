"""Warm-ahead prefill: what a finished conversation's next request will most likely start with,
computed while the engine has nothing else to do. Pure.

A chat's next turn is this prompt, this answer, the template's end of the assistant's turn and
the next user header, then the new question. When an answer ends, its sequence keeps its slot
(state "warming") with the answer's end and those closing tokens as work; a step runs them only
when no request is running or waiting, and the state kept for the next turn then holds them.
A request that arrives meanwhile goes first: it takes over a warming sequence its prompt starts
with (nothing copied), or a warming one gives its slot up, its state kept as computed so far.

It pays only when the engine gets the time: a request that arrives during warm-ahead work waits
for its step and the state it saves, which cost more than the few tokens they spare (measured:
1.07x-1.28x the time to first token with requests back to back, 0.88x with a 0.5 s pause). So
the engine measures both, as speculation measures its drafts, and warms only while the gaps
between its requests are longer than the work.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence as Seq


def warm_tail(
    computed: Seq[int], taken: Seq[int], closing: Seq[int], ends_turn: bool
) -> list[int] | None:
    """The tokens to compute after an answer: those it took but never computed (the last
    sampled one), without the end-of-turn token the model ended with, then `closing` (the
    template's end of turn and next user header). None when the next prompt would not start
    with them: no closing known, or the text was cut (a stop string) and so is not the tokens."""
    if not closing:
        return None
    left = list(taken[len(computed) :])
    if ends_turn:
        if not left:
            return None
        left = left[:-1]  # the end-of-turn token the model took: the closing has it, as written
    return left + list(closing)


class WarmGauge:
    """Whether warm-ahead work fits here: the engine's recent idle gaps (from the moment no
    request runs to the next one's arrival, 0 when one arrives while another runs) against
    what its warm-ahead steps took (the step and the states saved after it)."""

    WINDOW = 8  # gaps: about the last conversation's worth of turns
    SMOOTHING = 0.2

    def __init__(self) -> None:
        self._gaps: deque[float] = deque(maxlen=self.WINDOW)
        self._idle_since: float | None = None
        self.cost = 0.0  # seconds a warm-ahead step took, smoothed; 0 until one ran

    def idle(self, now: float) -> None:
        """No request runs or waits (warm-ahead work may)."""
        if self._idle_since is None:
            self._idle_since = now

    def idle_for(self, now: float) -> float:
        """How long no request has run or waited (0 while one does)."""
        return now - self._idle_since if self._idle_since is not None else 0.0

    def arrived(self, queued_at: float) -> None:
        """A request came (submitted at `queued_at`)."""
        since, self._idle_since = self._idle_since, None
        self._gaps.append(max(0.0, queued_at - since) if since is not None else 0.0)

    def spent(self, seconds: float) -> None:
        a = self.SMOOTHING
        self.cost = seconds if self.cost == 0.0 else (1 - a) * self.cost + a * seconds

    @property
    def pays(self) -> bool:
        """Until both are measured, yes; then while the median gap outlasts the work."""
        if self.cost == 0.0 or len(self._gaps) < self.WINDOW // 2:
            return True
        return statistics.median(self._gaps) > self.cost
