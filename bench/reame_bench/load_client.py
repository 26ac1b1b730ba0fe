"""The clients of `reame bench --load` and `--soak`: asyncio tasks, each on its own connection
pool, sending planned requests until the plan, the time or a stop runs out, and recording what
each request met."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from reame_bench.load_mix import Planned
from reame_bench.sse_reader import BenchTargetError, ChunkTally, SseDecoder
from reame_bench.targets import Timeline

# a request is a hang when it has not ended by then, even on a busy 2-core machine
REQUEST_TIMEOUT = 120.0


@dataclass(slots=True)
class Outcome:
    """What one request met. `status` None: no HTTP status came (a connection error or a hang);
    `problem`: what went wrong beyond the status (a stream that broke, a body that is not an
    answer), empty when nothing did."""

    kind: str
    status: int | None
    latency: float
    ttft: float | None = None
    retry_after: str | None = None
    problem: str = ""
    is_connection_error: bool = False
    is_hang: bool = False
    is_dropped: bool = False  # the client closed it on purpose, mid-stream


async def send(client: httpx.AsyncClient, base: str, planned: Planned) -> Outcome:
    started = time.perf_counter()
    try:
        return await asyncio.wait_for(_send(client, base, planned, started), REQUEST_TIMEOUT)
    except TimeoutError:
        return Outcome(
            planned.kind,
            None,
            time.perf_counter() - started,
            problem=f"no end after {REQUEST_TIMEOUT:.0f} s",
            is_hang=True,
        )
    except httpx.TransportError as exc:
        problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return Outcome(
            planned.kind,
            None,
            time.perf_counter() - started,
            problem=problem,
            is_connection_error=True,
        )


async def _send(client: httpx.AsyncClient, base: str, planned: Planned, started: float) -> Outcome:
    headers = {"content-type": "application/json"}
    request = client.build_request(
        "POST", base + planned.path, content=planned.content, headers=headers
    )
    response = await client.send(request, stream=True)
    try:
        outcome = Outcome(planned.kind, response.status_code, 0.0)
        outcome.retry_after = response.headers.get("retry-after")
        if response.status_code == 200 and planned.is_stream:
            await _read_stream(response, planned, outcome, started)
        else:
            body = await response.aread()
            if response.status_code == 200:
                outcome.problem = _answer_problem(body)
        outcome.latency = time.perf_counter() - started
        return outcome
    finally:
        # NOTE: closing a response not read to its end closes its connection: the drop
        await response.aclose()


async def _read_stream(
    response: httpx.Response, planned: Planned, outcome: Outcome, started: float
) -> None:
    decoder, tally = SseDecoder(), ChunkTally(Timeline(started))
    try:
        async for text in response.aiter_text():
            now = time.perf_counter()
            for payload in decoder.feed(text):
                tally.add(payload, now)
            if tally.content_chunks and outcome.ttft is None:
                outcome.ttft = tally.timeline.first - started
            if planned.drop_after and tally.content_chunks >= planned.drop_after:
                outcome.is_dropped = True
                return
            if tally.is_done:
                return
        for payload in decoder.finish():
            tally.add(payload, time.perf_counter())
    except BenchTargetError as exc:
        outcome.problem = str(exc)
        return
    if not tally.is_done:
        outcome.problem = "the stream ended without data: [DONE]"


def _answer_problem(body: bytes) -> str:
    try:
        answer = json.loads(body)
    except ValueError:
        return f"a 200 whose body is not JSON: {body[:200]!r}"
    if not isinstance(answer, dict) or not answer.get("choices"):
        return f"a 200 with no choices: {body[:200]!r}"
    return ""


@dataclass(slots=True)
class ClientPlan:
    """How the clients pace themselves. `think`: seconds between requests, drawn uniformly;
    a 429 is followed by its Retry-After (jittered by up to half), as a polite client does."""

    clients: int
    max_requests: int | None
    seconds: float
    think: tuple[float, float] = (0.0, 0.2)
    seed: int = 0


async def run_clients(
    base: str,
    planned: Callable[[int], Planned],
    pacing: ClientPlan,
    outcomes: list[Outcome],
    stop: asyncio.Event | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Appends each finished request's Outcome to `outcomes` as it ends (a sampler may read
    them meanwhile). Ends when `max_requests` were sent, `seconds` passed or `stop` is set:
    requests in flight then run to their end, at most REQUEST_TIMEOUT."""
    deadline = time.monotonic() + pacing.seconds
    counter = (
        iter(range(pacing.max_requests)) if pacing.max_requests is not None else itertools.count()
    )
    stop = stop or asyncio.Event()

    def more() -> bool:
        return not stop.is_set() and time.monotonic() < deadline

    async def pause(seconds: float) -> None:
        left = max(0.0, min(seconds, deadline - time.monotonic()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), left)

    async def client(k: int) -> None:
        rng = random.Random(pacing.seed * 7_000_003 + k)
        timeout = httpx.Timeout(30.0, read=REQUEST_TIMEOUT)
        async with httpx.AsyncClient(timeout=timeout, headers=headers) as http:
            while more():
                index = next(counter, None)
                if index is None:
                    return
                outcome = await send(http, base, planned(index))
                outcomes.append(outcome)
                wait = rng.uniform(*pacing.think)
                if outcome.status == 429:
                    wait += _retry_seconds(outcome.retry_after) * rng.uniform(1.0, 1.5)
                await pause(wait)

    await asyncio.gather(*(client(k) for k in range(pacing.clients)))


def _retry_seconds(value: str | None) -> float:
    try:
        return min(max(float(value or 1), 0.0), 10.0)
    except ValueError:
        return 1.0
