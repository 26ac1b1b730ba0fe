"""One phase of `reame bench --hostile` from beside the server: the victim's clients (short
chats back to back under their own key), /health polled every 100 ms, and the server's RSS."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from reame_bench.hostile_cpu import CpuMark, cores_between
from reame_bench.hostile_plan import ANSWER_TOKENS, CHAT_PATH, short_chat
from reame_bench.soak_runner import memory_stores_mb, proc_figures

HEALTH_PERIOD_S = 0.1
HEALTH_TIMEOUT_S = 5.0  # a /health slower than this is counted unanswered
RSS_PERIOD_S = 0.25
VICTIM_TIMEOUT_S = 120.0


@dataclass(slots=True)
class Phase:
    """What one phase measured. `victim_s`: the victim's 200 answers' latencies; `health_s`:
    every /health poll's (an unanswered one at the time it was given up)."""

    name: str
    seconds: float = 0.0
    victim_s: list[float] = field(default_factory=list)
    victim_statuses: Counter[str] = field(default_factory=Counter)
    victim_problems: list[str] = field(default_factory=list)
    health_s: list[float] = field(default_factory=list)
    health_failures: Counter[str] = field(default_factory=Counter)
    rss_mb: list[float] = field(default_factory=list)
    stores_mb: float = 0.0  # the budgeted in-memory stores at the phase's end
    cpu_cores: dict[str, float] = field(default_factory=dict)  # cores used: by whom

    @classmethod
    def merged(cls, phases: Sequence[Phase]) -> Phase:
        """Rounds of one kind of phase as one (their CPU weighted by their seconds)."""
        out = cls(phases[0].name)
        for p in phases:
            out.seconds += p.seconds
            out.victim_s += p.victim_s
            out.victim_statuses += p.victim_statuses
            out.victim_problems += p.victim_problems
            out.health_s += p.health_s
            out.health_failures += p.health_failures
            out.rss_mb += p.rss_mb
            out.stores_mb = p.stores_mb
        out.cpu_cores = {
            who: round(sum(p.cpu_cores.get(who, 0.0) * p.seconds for p in phases) / out.seconds, 2)
            for who in phases[0].cpu_cores
        }
        return out


async def victim(
    base: str, key: str, model: str, phase: Phase, until: float, first_index: int
) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    timeout = httpx.Timeout(30.0, read=VICTIM_TIMEOUT_S)
    async with httpx.AsyncClient(headers=headers, timeout=timeout) as client:
        index = first_index
        while time.monotonic() < until:
            body = short_chat(model, 0, index)
            index += 1
            started = time.perf_counter()
            try:
                response = await client.post(base + CHAT_PATH, json=body)
            except httpx.HTTPError as exc:
                phase.victim_statuses[type(exc).__name__] += 1
                await asyncio.sleep(0.1)
                continue
            elapsed = time.perf_counter() - started
            phase.victim_statuses[str(response.status_code)] += 1
            if response.status_code != 200:
                phase.victim_problems.append(f"{response.status_code}: {response.text[:200]}")
                continue
            tokens = (response.json().get("usage") or {}).get("completion_tokens")
            if tokens != ANSWER_TOKENS:
                phase.victim_problems.append(f"a 200 of {tokens} tokens, not {ANSWER_TOKENS}")
            phase.victim_s.append(elapsed)


async def health(base: str, phase: Phase, until: float) -> None:
    async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as client:
        while time.monotonic() < until:
            started = time.perf_counter()
            try:
                response = await client.get(base + "/health")
                if response.status_code != 200:
                    phase.health_failures[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                phase.health_failures[type(exc).__name__] += 1
            elapsed = time.perf_counter() - started
            phase.health_s.append(elapsed)
            await asyncio.sleep(max(0.0, HEALTH_PERIOD_S - elapsed))


async def rss(pid: int, phase: Phase, until: float) -> None:
    while time.monotonic() < until:
        try:
            phase.rss_mb.append(proc_figures(pid)[0])
        except OSError:
            return  # the server is gone: the checks say so
        await asyncio.sleep(RSS_PERIOD_S)


async def watch(
    name: str, base: str, key: str, model: str, pids: Mapping[str, int], seconds: float,
    clients: int, first_index: int,
) -> Phase:  # fmt: skip
    """`clients` victims, the /health poller and the RSS sampler for `seconds`; a victim's
    request in flight at the end runs to its end and counts. `pids`: the server's (as
    "server") and the others whose CPU is told apart."""
    phase = Phase(name)
    pid = pids["server"]
    mark = CpuMark.now(pids)
    started = time.monotonic()
    until = started + seconds
    await asyncio.gather(
        *(
            victim(base, key, model, phase, until, first_index + k * 100_000)
            for k in range(clients)
        ),
        health(base, phase, until),
        rss(pid, phase, until),
    )
    phase.seconds = time.monotonic() - started
    phase.cpu_cores = cores_between(mark, CpuMark.now(pids))
    phase.stores_mb = await memory_stores_mb(base, {})
    return phase
