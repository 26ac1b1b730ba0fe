"""What a step produced, handed out after it: the states computed for reuse (the one way a state
leaves the engine), then each request's events. Collected first and delivered together, so that
the scheduler and the update are plain functions of engine state that a test can read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from reame.engine.request import Event
from reame.engine.sequence import Sequence
from reame.saved_state import SavedState

log = structlog.get_logger("reame.engine")


@dataclass(slots=True, frozen=True)
class Kept:
    """A computed state for the reuse index: a snapshot of a prompt's start, or a request's
    final state (its prompt, its answer, and what was warmed after it)."""

    state: SavedState
    scope: str
    is_final: bool = False
    num_restored: int = 0  # of its tokens, how many its request restored rather than computed


StateHook = Callable[[Kept], None]


@dataclass(slots=True)
class Outbox:
    events: list[tuple[Sequence, Event]] = field(default_factory=list)
    states: list[Kept] = field(default_factory=list)

    def emit(self, seq: Sequence, event: Event) -> None:
        if not seq.keep_early(event):
            self.events.append((seq, event))

    def release_early(self, seq: Sequence) -> None:
        self.events.extend((seq, event) for event in seq.release_early())

    def deliver(self, on_state: StateHook | None) -> None:
        """Hand the states to `on_state`, then call each request's sink with its events in
        order: a client that saw its answer end finds its state kept. A sink that raises loses
        its event alone (NOTE: sinks only queue; none should)."""
        states, self.states = self.states, []
        for kept in states if on_state is not None else ():
            try:
                on_state(kept)
            except Exception:  # NOTE: a state not kept costs a later request time, no more
                log.exception("a computed state could not be kept")
        events, self.events = self.events, []
        for seq, event in events:
            try:
                seq.sink(event)
            except Exception:
                log.exception("a request's sink failed", request_id=seq.request.request_id)
