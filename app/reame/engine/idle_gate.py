"""Whether idle-time work (warm-ahead, a history computed ahead) may start, and whether a step of
it under way stops: it never makes a request wait. Pure; thread-safe where the docstrings say.

Measured at the Qwen3 1.7B shape, one client, a second's pause between requests: a history step
is 0.7-0.8 s, and 2-4 of 8 later turns came during another conversation's and waited for the rest
of it (0.8-1.9 s where the turn itself is 0.36-0.6 s). So no step starts while a request is on
its way in (rendered, tokenized, its stored states read, in `arriving`), and a step under way
stops (llama.cpp's abort callback asks `stops`) for a submitted request that does not go on from
it. One that goes on from it lets it finish: stopped, the next turn whose history it computed
computed that history again itself (88 tokens, not 20).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


class IdleGate:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._num_arriving = 0
        self._work: tuple[Sequence[int], ...] = ()  # what the step under way computes
        self._stops = False
        self._ends_at = math.inf  # asked to stop: no step under way goes past it

    @contextmanager
    def arriving(self) -> Iterator[None]:
        """A request is on its way in, and is submitted in this block: meanwhile no idle-time
        step starts, nor a final state's read after a step (Engine._turn), each of which it
        would wait behind. Any thread."""
        with self._lock:
            self._num_arriving += 1
        try:
            yield
        finally:
            with self._lock:
                self._num_arriving -= 1

    @property
    def holds(self) -> bool:
        """No idle-time step starts now: a request is on its way in."""
        return self._num_arriving > 0

    def submitted(self, prompt: Sequence[int]) -> None:
        """A request came (not idle-time work itself). Any thread."""
        if not any(prompt[: len(work)] == work for work in self._work):
            self._stops = True

    def taken(self) -> None:
        """The engine takes what came: no idle-time step runs before it."""
        self._stops = False

    @contextmanager
    def under_way(self, work: tuple[Sequence[int], ...]) -> Iterator[None]:
        """An idle-time step runs in this block, computing `work` (a token list for each of its
        sequences, up to where the step ends)."""
        self._work = work
        try:
            yield
        finally:
            self._work = ()

    def ends_at(self, deadline: float) -> None:
        """The engine is asked to stop: idle-time work runs until `deadline` (time.monotonic()),
        a step under way then stops."""
        self._ends_at = deadline

    def stops(self) -> bool:
        """The step under way stops: a request came that goes on from none of its work, or
        the engine is stopping and its time for idle-time work is up."""
        return self._stops or time.monotonic() >= self._ends_at
