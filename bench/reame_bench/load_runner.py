"""`reame bench --load`: many clients at once on one server, a seeded mix of real, dropped,
oversize and malformed requests; then whether the server freed its slots and still answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from reame_bench.load_client import REQUEST_TIMEOUT, ClientPlan, Outcome, run_clients, send
from reame_bench.load_mix import CHAT, LOAD_WEIGHTS, plan
from reame_bench.load_report import FREED_BOUND_S, LoadFigures, connection_problems, summarize
from reame_bench.load_target import LoadTarget
from reame_bench.serve_process import read_metrics, server_5xx

RUNNING = "reame_running_sequences"
WAITING = "reame_waiting_requests"


async def wait_freed(
    base: str, headers: dict[str, str], bound: float = FREED_BOUND_S
) -> float | None:
    """Seconds until /metrics shows no running sequence and no waiting request; None if that
    did not happen within `bound`."""
    started = time.monotonic()
    while True:
        try:
            samples = await asyncio.to_thread(read_metrics, base, headers)
        except OSError:
            return None  # a server that no longer answers has freed nothing
        elapsed = time.monotonic() - started
        if samples.get(RUNNING, 0) == 0 and samples.get(WAITING, 0) == 0:
            return elapsed
        if elapsed > bound:
            return None
        await asyncio.sleep(0.05)


async def counted_5xx(base: str, headers: dict[str, str]) -> int:
    """The server's own count of its 5xx answers; -1 when it no longer answers /metrics."""
    try:
        return server_5xx(await asyncio.to_thread(read_metrics, base, headers))
    except OSError:
        return -1


async def answers(base: str, target: LoadTarget, seed: int) -> bool:
    """Whether a plain chat gets a whole 200 answer (the server is not wedged)."""
    timeout = httpx.Timeout(30.0, read=REQUEST_TIMEOUT)
    async with httpx.AsyncClient(headers=target.headers, timeout=timeout) as client:
        outcome = await send(client, base, plan(seed, -1, target.shape, {CHAT: 1}))
    return outcome.status == 200 and not outcome.problem


async def run_load(
    target: LoadTarget, pacing: ClientPlan, log: Callable[[str], None]
) -> tuple[dict[str, Any], LoadFigures, list[str]]:
    base, shape, seed = target.base, target.shape, pacing.seed
    log("warm-up: one chat")
    if not await answers(base, target, seed):
        log("the warm-up chat was not answered 200; loading anyway")
    outcomes: list[Outcome] = []
    log(
        f"load: {pacing.clients} clients, at most {pacing.max_requests} requests "
        f"or {pacing.seconds:.0f} s"
    )
    started = time.perf_counter()
    await run_clients(
        base, lambda i: plan(seed, i, shape, LOAD_WEIGHTS), pacing, outcomes, headers=target.headers
    )
    elapsed = time.perf_counter() - started
    log(f"load over after {elapsed:.1f} s; waiting for the slots to be freed")
    figures = summarize(outcomes)
    figures.freed_after_s = await wait_freed(base, target.headers)
    figures.answers_after = await answers(base, target, seed + 1)
    figures.server_5xx = await counted_5xx(base, target.headers)
    header = {
        **target.detail,
        "clients": pacing.clients,
        "bounds": f"{pacing.max_requests} requests or {pacing.seconds:.0f} s",
        "seed": seed,
        "wall time s": round(elapsed, 1),
        "requests/s": round(len(outcomes) / elapsed, 1) if elapsed > 0 else 0,
    }
    return header, figures, connection_problems(outcomes)


def bench_load(
    target: LoadTarget, pacing: ClientPlan, log: Callable[[str], None]
) -> tuple[dict[str, Any], LoadFigures, list[str]]:
    """Runs the load and stops a server the bench started, keeping its log's errors."""
    try:
        header, figures, details = asyncio.run(run_load(target, pacing, log))
    finally:
        code = target.close()
    if target.process is not None:
        figures.server_errors = target.process.error_lines()
        header["server exit code"] = code
        header["server log"] = str(target.process.log_path)
    return header, figures, details
