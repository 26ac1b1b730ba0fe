"""The attacks that hold a connection, for `reame bench --hostile`: streams never read (a
receive buffer of a few KB, frames of 20 logprobs a token), senders that owe their body and send
a byte at a time, and connections opened and left silent. Each worker opens one connection
after another until the phase ends."""

from __future__ import annotations

import asyncio
import socket
import time

from reame_bench.hostile_attacks import REQUEST_TIMEOUT, Record
from reame_bench.hostile_plan import (
    CHAT_PATH,
    CLOSED,
    CUT_OFF,
    FINISHED,
    IDLE_CLOSED,
    OPEN_AT_END,
    REFUSED,
    STALL_RCVBUF,
    AttackPlan,
    short_chat,
    stalled_stream,
)
from reame_bench.hostile_wire import Sockets, json_body, read_head, request, send

REFUSED_WITHIN_S = 0.5  # a connection closed this soon without a byte was refused as it came
RETRY_AFTER_S = 1.0  # a holder refused (429) comes back after the server's Retry-After
SLOW_BODY_BYTES = 4096  # what a slow sender owes: more than it sends in any run
SETTLE_S = 3.0  # to read what is left of a stream never read, at the end


async def stalled(plan: AttackPlan, socks: Sockets, rec: Record, until: float, worker: int) -> None:
    """Streams read up to their status line, then never again, one after another: each stream
    answered is left as it is (the server should cut it off once its writes wait past
    client_timeout, and give its places back) and the next is asked for at once; a 429 is
    retried after its Retry-After. What became of each is read when the phase ends (`settle`)."""
    for index in range(worker * 1_000_000, (worker + 1) * 1_000_000):
        if time.monotonic() >= until:
            return
        body = json_body(stalled_stream(plan.model, plan.seed + 2, index, plan.stall_tokens))
        try:
            sock = await socks.connect(rcvbuf=STALL_RCVBUF)
        except OSError:
            rec.add(REFUSED)
            await asyncio.sleep(RETRY_AFTER_S)
            continue
        is_held = is_asking = False
        try:
            is_asking = True
            await send(sock, request(CHAT_PATH, plan.key, body))
            got = await read_head(sock, REQUEST_TIMEOUT, chunk=512)
            is_asking = False
            if got is None:
                rec.add(REFUSED)
                socks.close(sock)
                await asyncio.sleep(RETRY_AFTER_S)
            elif got[0] == 200:
                rec.held.append((sock, got[2]))
                is_held = True
            else:
                rec.add(str(got[0]))
                socks.close(sock)
                await asyncio.sleep(RETRY_AFTER_S)
        except asyncio.CancelledError:
            if is_asking:
                rec.add(OPEN_AT_END)
            raise
        except (TimeoutError, OSError):
            rec.add(CLOSED)
        finally:
            if not is_held:
                socks.close(sock)


async def settle(socks: Sockets, rec: Record) -> None:
    """What became of the streams never read: each is read now, for up to SETTLE_S: one the
    server cut off ends (what its kernel still held, then the end, or a reset) without its
    [DONE]; one still being written goes on (open at the end)."""

    async def one(sock: socket.socket, rest: bytes) -> None:
        loop, data = asyncio.get_running_loop(), bytearray(rest)
        deadline = time.monotonic() + SETTLE_S
        outcome = OPEN_AT_END
        while (left := deadline - time.monotonic()) > 0:
            try:
                chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), left)
            except TimeoutError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                outcome = CUT_OFF
                break
            data += chunk
            if b"[DONE]" in data[-64:]:
                outcome = FINISHED
                break
        rec.add(outcome)
        socks.close(sock)

    held, rec.held = rec.held, []
    await asyncio.gather(*(one(sock, rest) for sock, rest in held))


async def slow(plan: AttackPlan, socks: Sockets, rec: Record, until: float, worker: int) -> None:
    """Headers, then the body a byte at a time: every half client_timeout (even workers: each
    byte comes in time, so only max_connections bounds them) or every 1.5 (odd: a 408)."""
    interval = plan.client_timeout * (0.5 if worker % 2 == 0 else 1.5)
    head = request(CHAT_PATH, plan.key, b"", content_length=SLOW_BODY_BYTES)
    body = json_body(short_chat(plan.model, plan.seed + 3, worker)).ljust(SLOW_BODY_BYTES)
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            sock = await socks.connect()
        except OSError:
            rec.add(REFUSED)
            await asyncio.sleep(RETRY_AFTER_S)
            continue
        answer = asyncio.ensure_future(read_head(sock, 10 * REQUEST_TIMEOUT))
        try:
            await send(sock, head)
            for k in range(SLOW_BODY_BYTES):
                done, _ = await asyncio.wait({answer}, timeout=interval)
                if done:
                    break
                try:
                    await send(sock, body[k : k + 1])
                except OSError:
                    break
            got = await answer
            held = time.monotonic() - started
            if got is not None:
                rec.add(str(got[0]), held)
            elif held >= REFUSED_WITHIN_S:
                rec.add(CLOSED, held)
            else:
                rec.add(REFUSED, held)
                await asyncio.sleep(RETRY_AFTER_S)
        except asyncio.CancelledError:
            rec.add(OPEN_AT_END)
            raise
        except (TimeoutError, OSError):
            rec.add(CLOSED, time.monotonic() - started)
        finally:
            answer.cancel()
            socks.close(sock)


async def idle(plan: AttackPlan, socks: Sockets, rec: Record, until: float, worker: int) -> None:
    """A connection that sends nothing, held until the server closes it, then another."""
    await asyncio.sleep(worker * 0.01)  # NOTE: a few at a time: the listen backlog is 100
    loop = asyncio.get_running_loop()
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            sock = await socks.connect()
        except OSError:
            rec.add(REFUSED)
            await asyncio.sleep(RETRY_AFTER_S)
            continue
        try:
            try:
                data = await loop.sock_recv(sock, 1024)
            except OSError:
                data = b""
        except asyncio.CancelledError:
            rec.add(OPEN_AT_END)
            raise
        finally:
            socks.close(sock)
        held = time.monotonic() - started
        if data.startswith(b"HTTP/"):
            rec.add(data.split(b" ", 2)[1].decode("latin-1"), held)
        elif held >= REFUSED_WITHIN_S:
            rec.add(IDLE_CLOSED, held)
        else:
            rec.add(REFUSED, held)
            await asyncio.sleep(RETRY_AFTER_S)
