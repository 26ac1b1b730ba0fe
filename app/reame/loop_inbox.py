"""Engine events handed to one asyncio event loop, a wake-up at a time: the engine thread
appends, the loop drains (HTTP streams read them from there)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from reame.engine.request import Event, FinishEvent

MAX_UNREAD = 1024  # events of one call not yet taken by its reader
HOLD_AT = 64  # unread events past which a request stops computing until its reader reads
SEND_WAIT_SECONDS = 0.005  # how long the engine waits for the loop to send what goes out at once


@dataclass(slots=True, frozen=True)
class ChoiceEvent:
    index: int
    event: Event


_Item = tuple[asyncio.Queue[ChoiceEvent], ChoiceEvent, Callable[[], None], Callable[[], None]]


class LoopInbox:
    """Hands engine events to one event loop with at most one wake-up pending. The engine
    emits a step's events, then calls `wake` as it enters the next llama_decode (a wake-up
    per token, or one while the engine still needs the GIL, costs the decode threads time on
    a 2-core machine). Tokens are gathered for `interval` seconds between wake-ups; a
    stream's first visible token (text or thought: a thinking model's first tokens are often
    framing whitespace that shows nothing) and every finish go out at once: the engine waits
    (SEND_WAIT_SECONDS at most) until the loop has handed them to their readers. A reader that
    leaves HOLD_AT events untaken (its writes wait on a client that does not read) has its
    request held (`on_backlog`: it computes nothing until the reader takes them); past
    MAX_UNREAD, its requests are stopped (`on_unread`) and their tokens dropped, the finish
    still delivered."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        self._loop, self._interval = loop, interval
        self._items: deque[_Item] = deque()
        self._is_scheduled = False
        self._is_urgent = False
        self._last_wake = 0.0
        self._handed = threading.Event()  # the loop ran what an urgent wake-up scheduled

    def sink(
        self,
        events: asyncio.Queue[ChoiceEvent],
        index: int,
        on_unread: Callable[[], None] = lambda: None,
        on_backlog: Callable[[], None] = lambda: None,
    ) -> Callable[[Event], None]:
        has_shown = False

        def put(event: Event) -> None:  # on the engine thread
            nonlocal has_shown
            if isinstance(event, FinishEvent):
                self._is_urgent = True
            elif not has_shown and (event.text or event.reasoning):
                self._is_urgent = has_shown = True
            self._items.append((events, ChoiceEvent(index, event), on_unread, on_backlog))

        return put

    def wake(self) -> None:  # on the engine thread
        if not self._items or self._is_scheduled:
            return
        now = time.perf_counter()
        is_urgent = self._is_urgent
        if not is_urgent and now - self._last_wake < self._interval:
            return
        self._is_urgent, self._is_scheduled, self._last_wake = False, True, now
        self._handed.clear()
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody is left to read these
            self._items.clear()
            return
        if is_urgent:
            # NOTE: the engine may go on to read a state, which holds the GIL while its buffer
            # is allocated (a first touch of 65 MB: up to 200 ms on this VM): the first token
            # of a next turn at the Qwen3 1.7B shape reached its reader only after that read
            self._handed.wait(SEND_WAIT_SECONDS)

    def _deliver(self) -> None:  # on the loop; NOTE: clear the flag first, then drain
        self._is_scheduled = False
        while self._items:
            events, choice, on_unread, on_backlog = self._items.popleft()
            unread = events.qsize()
            if unread >= HOLD_AT and not isinstance(choice.event, FinishEvent):
                if unread >= MAX_UNREAD:
                    on_unread()
                    continue
                on_backlog()
            events.put_nowait(choice)
        # NOTE: after the readers the puts woke (the loop runs its callbacks in order)
        self._loop.call_soon(self._handed.set)
