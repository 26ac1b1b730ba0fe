"""SSE heartbeats while a stream waits: pure asyncio, no model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from reame.api.heartbeat import HEARTBEAT, with_heartbeats


async def slow_frames(delays: list[float], closed: list[bool]) -> AsyncIterator[str]:
    try:
        for i, delay in enumerate(delays):
            await asyncio.sleep(delay)
            yield f"data: {i}\n\n"
    finally:
        closed.append(True)


async def collect(delays: list[float], interval: float) -> tuple[list[str], list[bool]]:
    closed: list[bool] = []
    out = [f async for f in with_heartbeats(slow_frames(delays, closed), interval)]
    return out, closed


def test_a_silent_wait_gets_heartbeats_and_every_frame_comes_in_order() -> None:
    out, closed = asyncio.run(collect([0.25, 0.0, 0.0], interval=0.04))
    frames = [f for f in out if f != HEARTBEAT]
    assert frames == ["data: 0\n\n", "data: 1\n\n", "data: 2\n\n"]
    assert out.index("data: 0\n\n") >= 3  # several heartbeats came before the first frame
    assert HEARTBEAT.startswith(":") and closed == [True]


def test_a_quick_stream_gets_no_heartbeat() -> None:
    out, _ = asyncio.run(collect([0.0, 0.0], interval=5.0))
    assert HEARTBEAT not in out


def test_leaving_early_closes_the_stream_behind_it_even_while_it_waits() -> None:
    async def run() -> list[bool]:
        closed: list[bool] = []
        stream = with_heartbeats(slow_frames([10.0], closed), interval=0.01)
        assert await anext(stream) == HEARTBEAT  # the source is waiting inside its sleep
        await stream.aclose()
        return closed

    assert asyncio.run(run()) == [True]


def test_an_error_of_the_stream_reaches_the_reader() -> None:
    async def failing() -> AsyncIterator[str]:
        yield "data: 0\n\n"
        raise RuntimeError("boom")

    async def run() -> list[str]:
        seen = []
        try:
            async for f in with_heartbeats(failing(), 1.0):
                seen.append(f)
        except RuntimeError as exc:
            seen.append(str(exc))
        return seen

    assert asyncio.run(run()) == ["data: 0\n\n", "boom"]
