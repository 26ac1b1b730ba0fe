"""A stream that speaks while it waits: SSE comment lines when no frame came for a while, so a
client, a proxy or a load balancer does not take a slow first token for a dead connection."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

HEARTBEAT = ": keep-alive\n\n"  # an SSE comment: every client ignores it


async def with_heartbeats(frames: AsyncIterator[str], interval: float) -> AsyncGenerator[str]:
    """`frames` as they come, and HEARTBEAT after every `interval` seconds without one. Closing
    this closes `frames` (so a client gone stops the work behind it)."""
    source = aiter(frames)
    pending: asyncio.Task[str] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield HEARTBEAT
                continue
            task, pending = pending, None
            try:
                item = task.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
        close = getattr(source, "aclose", None)
        if close is not None:
            await close()
