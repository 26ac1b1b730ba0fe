"""What a step produced, handed out after it: each request's events, and prefix states due to be
kept. Collected first and delivered together, so that the scheduler and the update are plain
functions of engine state that a test can read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from reame.engine.request import Event
from reame.engine.sequence import Sequence
from reame.saved_state import SavedState

log = structlog.get_logger("reame.engine")

SnapshotHook = Callable[[SavedState, str], None]


@dataclass(slots=True)
class Outbox:
    events: list[tuple[Sequence, Event]] = field(default_factory=list)
    snapshots: list[tuple[SavedState, str]] = field(default_factory=list)  # state, scope
    # final states kept after warm-ahead work, and where each goes (the request's keep_later)
    finals: list[tuple[Callable[[SavedState], None], SavedState]] = field(default_factory=list)

    def emit(self, seq: Sequence, event: Event) -> None:
        if seq.early_events is not None:
            seq.early_events.append(event)
        else:
            self.events.append((seq, event))

    def release_early(self, seq: Sequence) -> None:
        early, seq.early_events = seq.early_events, None
        self.events.extend((seq, event) for event in early or ())

    def deliver(self, on_snapshot: SnapshotHook | None) -> None:
        """Call each request's sink with its events in order, then the snapshot hook. A sink
        that raises loses its event alone (NOTE: sinks only queue; none should)."""
        events, self.events = self.events, []
        for seq, event in events:
            try:
                seq.sink(event)
            except Exception:
                log.exception("a request's sink failed", request_id=seq.request.request_id)
        snapshots, self.snapshots = self.snapshots, []
        for state, scope in snapshots if on_snapshot is not None else ():
            try:
                on_snapshot(state, scope)
            except Exception:  # NOTE: a state not kept costs a later request time, no more
                log.exception("a prefix state could not be kept")
        finals, self.finals = self.finals, []
        for keep, state in finals:
            try:
                keep(state)
            except Exception:
                log.exception("a final state could not be kept")
