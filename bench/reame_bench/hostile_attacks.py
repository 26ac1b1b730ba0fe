"""The attacks that send requests and read their answers, for `reame bench --hostile`: a flood
of ordinary chats from one key, more at once than its share, and completions with huge prompt
lists. Each worker loops until the phase ends; what each request met goes into a Record."""

from __future__ import annotations

import asyncio
import itertools
import socket
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator

from reame_bench.hostile_plan import (
    CHAT_PATH,
    CLOSED,
    COMPLETIONS_PATH,
    OPEN_AT_END,
    REFUSED,
    TIMEOUT,
    AttackPlan,
    prompt_lists,
    short_chat,
)
from reame_bench.hostile_wire import Sockets, json_body, read_answer, request, send

REQUEST_TIMEOUT = 120.0  # an answer later than this is a hang, even on 2 busy cores


class Record:
    """One attack's outcomes, counted, and the seconds some of them took."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.seconds: defaultdict[str, list[float]] = defaultdict(list)
        self.held: list[tuple[socket.socket, bytes]] = []  # connections left as they are

    def add(self, outcome: str, seconds: float | None = None) -> None:
        self.counts[outcome] += 1
        if seconds is not None:
            self.seconds[outcome].append(seconds)

    def summary(self) -> dict[str, object]:
        return {
            "outcomes": dict(self.counts),
            "median_s": {k: round(statistics.median(v), 3) for k, v in self.seconds.items()},
        }


async def ask(
    socks: Sockets, sock: socket.socket | None, data: bytes, rec: Record
) -> tuple[socket.socket | None, int | None]:
    """Sends one request on `sock` (a new connection when None) and reads its answer; the
    connection to use next (None: it ended) and the status (None: no answer)."""
    is_fresh = sock is None
    if sock is None:
        try:
            sock = await socks.connect()
        except OSError:
            rec.add(REFUSED)
            return None, None
    try:
        await send(sock, data)
        got = await read_answer(sock, REQUEST_TIMEOUT)
    except TimeoutError:
        rec.add(TIMEOUT)
        socks.close(sock)
        return None, None
    except OSError:
        got = None
    if got is None:
        rec.add(REFUSED if is_fresh else CLOSED)
        socks.close(sock)
        return None, None
    status, headers = got
    rec.add(str(status))
    if headers.get("connection", "").lower() == "close":
        socks.close(sock)
        return None, status
    return sock, status


async def requests_until(
    socks: Sockets, bodies: Iterator[bytes], rec: Record, until: float, pause_after: float,
    path: str, key: str,
) -> None:  # fmt: skip
    """Sends the bodies one after another on one kept-alive connection until `until`; waits
    `pause_after` after each answer that is not a 200."""
    sock, is_asking = None, False
    try:
        while time.monotonic() < until:
            is_asking = True
            sock, status = await ask(socks, sock, request(path, key, next(bodies)), rec)
            is_asking = False
            if status != 200:
                await asyncio.sleep(pause_after)
    except asyncio.CancelledError:
        if is_asking:
            rec.add(OPEN_AT_END)
        raise
    finally:
        if sock is not None:
            socks.close(sock)


async def flood(plan: AttackPlan, socks: Sockets, rec: Record, until: float, worker: int) -> None:
    """Ordinary chats back to back; a refusal is retried after `flood_pause`, not after its
    Retry-After (a flooder does not wait its turn)."""
    numbers = itertools.count(worker * 1_000_000)
    bodies = (json_body(short_chat(plan.model, plan.seed + 1, i)) for i in numbers)
    await requests_until(socks, bodies, rec, until, plan.flood_pause, CHAT_PATH, plan.key)


async def huge_prompts(
    plan: AttackPlan, socks: Sockets, rec: Record, until: float, worker: int
) -> None:
    """Completions over the prompt list's cap and over the server's places, in turn, each sent
    again `flood_pause` after its refusal."""
    bodies = [json_body(b) for b in prompt_lists(plan.model, plan.prompt_list, plan.max_places)]
    await requests_until(
        socks, itertools.cycle(bodies), rec, until, plan.flood_pause, COMPLETIONS_PATH, plan.key
    )
