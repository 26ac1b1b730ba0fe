"""Engine events handed to an event loop: what goes out at once and what is gathered."""

from __future__ import annotations

import asyncio
import threading

from reame.engine.request import Finish, FinishEvent, TokenEvent
from reame.loop_inbox import MAX_UNREAD, ChoiceEvent, LoopInbox

LONG = 60.0  # a gathering interval no test waits out


def drained(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[ChoiceEvent]) -> list[object]:
    loop.run_until_complete(asyncio.sleep(0))
    out = []
    while not queue.empty():
        out.append(queue.get_nowait().event)
    return out


def test_the_first_token_that_shows_goes_out_at_once_after_framing_that_shows_nothing() -> None:
    # a thinking model's first token is often the template's newline, which shows nothing; the
    # first words of its thought must not wait out the interval behind it (they did: ~30 ms of
    # every thinking stream's time to first token)
    loop = asyncio.new_event_loop()
    try:
        inbox = LoopInbox(loop, LONG)
        queue: asyncio.Queue[ChoiceEvent] = asyncio.Queue()
        put = inbox.sink(queue, 0)
        framing = TokenEvent(1, "", in_thought=True)
        put(framing)
        inbox.wake()
        assert drained(loop, queue) == [framing]
        first_words = TokenEvent(2, "", reasoning="Let me", in_thought=True)
        put(first_words)
        inbox.wake()
        assert drained(loop, queue) == [first_words]
        later = TokenEvent(3, "", reasoning=" see", in_thought=True)
        put(later)
        inbox.wake()
        assert drained(loop, queue) == []  # gathered: the interval has not passed
        finish = FinishEvent(Finish.STOP, "", 5, 3)
        put(finish)
        inbox.wake()
        assert drained(loop, queue) == [later, finish]  # a finish goes out at once
    finally:
        loop.close()


def test_each_stream_has_its_own_first_visible_token() -> None:
    loop = asyncio.new_event_loop()
    try:
        inbox = LoopInbox(loop, LONG)
        first: asyncio.Queue[ChoiceEvent] = asyncio.Queue()
        second: asyncio.Queue[ChoiceEvent] = asyncio.Queue()
        put_first, put_second = inbox.sink(first, 0), inbox.sink(second, 0)
        put_first(TokenEvent(1, "Hello"))
        inbox.wake()
        assert len(drained(loop, first)) == 1
        put_first(TokenEvent(2, " there"))
        inbox.wake()
        assert drained(loop, first) == []
        opening = TokenEvent(3, "Hi")
        put_second(opening)
        inbox.wake()
        assert drained(loop, second) == [opening]
    finally:
        loop.close()


def test_a_reader_that_stops_reading_has_its_requests_stopped_and_still_gets_the_end() -> None:
    loop = asyncio.new_event_loop()
    try:
        inbox = LoopInbox(loop, 0.0)
        queue: asyncio.Queue[ChoiceEvent] = asyncio.Queue()
        stopped: list[int] = []
        put = inbox.sink(queue, 0, lambda: stopped.append(1))
        for i in range(MAX_UNREAD + 5):
            put(TokenEvent(i, "x"))
        finish = FinishEvent(Finish.ABORT, "", 5, MAX_UNREAD + 5)
        put(finish)
        inbox.wake()
        events = drained(loop, queue)
        assert len(events) == MAX_UNREAD + 1 and events[-1] == finish
        assert stopped  # the engine is told to stop it (at its next step)
    finally:
        loop.close()


def test_what_goes_out_at_once_has_reached_its_reader_when_the_engine_goes_on() -> None:
    # the engine went on to read a state, holding the GIL while it allocated the buffer: the
    # first token reached its reader after the read (190 ms at the Qwen3 1.7B shape)
    loop = asyncio.new_event_loop()
    runs = threading.Thread(target=loop.run_forever, daemon=True)
    runs.start()
    try:
        inbox = LoopInbox(loop, LONG)
        queue: asyncio.Queue[ChoiceEvent] = asyncio.Queue()
        read: list[object] = []
        reading = threading.Event()

        async def reader() -> None:
            reading.set()
            while True:
                read.append((await queue.get()).event)

        reads = asyncio.run_coroutine_threadsafe(reader(), loop)
        assert reading.wait(5)
        put = inbox.sink(queue, 0)
        first = TokenEvent(1, "Hello")
        put(first)
        inbox.wake()  # as the engine enters its next decode
        assert read == [first]
        later = TokenEvent(2, " there")
        put(later)
        inbox.wake()  # gathered for the interval: not waited for
        assert read == [first]
        reads.cancel()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runs.join(5)
        loop.run_until_complete(asyncio.sleep(0))  # the reader's cancellation
        loop.close()
