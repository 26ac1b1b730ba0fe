"""`reame bench --hostile`: a real `reame serve` on 127.0.0.1 with two keys, a victim's and an
attacker's; two phases of equal length, quiet (the attacker's process started beside it, idle)
then hostile (the same victim load while the attacker runs its attacks); the server's own
counts read between them; every socket closed, both processes ended, within a hard bound."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from reame.config import Settings
from reame_bench.hostile_plan import ATTACKS, CHAT_PATH, AttackPlan, short_chat
from reame_bench.hostile_report import HostileFigures, server_counts
from reame_bench.hostile_watch import Phase, watch
from reame_bench.load_runner import wait_freed
from reame_bench.load_target import ServeOptions, first_model, serve_args
from reame_bench.serve_process import ServeProcess, python_path, read_metrics
from reame_bench.soak_runner import proc_figures
from reame_bench.sse_reader import BenchTargetError

DEFAULT_PARALLEL, DEFAULT_CONTEXT = 4, 2048
WARM_UP_CHATS = 3
ATTACKER_GRACE_S = 60.0  # past its seconds, for the attacker to close up and report
OVERALL_SLACK_S = 300.0  # the whole run's bound: both phases and this


@dataclass(frozen=True, slots=True)
class HostileOptions:
    serve: ServeOptions
    seconds: float = 90.0  # each phase
    rounds: int = 1  # quiet then hostile, this many times (a shared machine's load varies)
    clients: int = 2  # the victim's, back to back
    attacks: tuple[str, ...] = ATTACKS
    client_timeout: float = 5.0
    prompt_list: int = 100_000
    flood: int = 12
    stalled: int = 16
    slow: int = 16
    idle: int = 300
    seed: int = 0


class AttackerProcess:
    """`python -m reame_bench.hostile_attacker`, idle until told to go (stderr to a file)."""

    def __init__(self, plan: AttackPlan, log_path: Path) -> None:
        env = {**os.environ, "PYTHONPATH": python_path(os.environ)}
        self._log = log_path.open("a")
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reame_bench.hostile_attacker", plan.to_json()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )

    async def line(self, timeout: float) -> str:
        """Its next stdout line; killed (and an error) if none comes in `timeout`."""
        assert self.proc.stdout is not None
        try:
            return await asyncio.wait_for(asyncio.to_thread(self.proc.stdout.readline), timeout)
        except TimeoutError:
            self.proc.kill()
            raise BenchTargetError(f"the attacker said nothing in {timeout:.0f} s") from None
        except asyncio.CancelledError:  # NOTE: the run's bound: the reading thread ends too
            self.proc.kill()
            raise

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self) -> int:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]  # NOTE: an idle one ends
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def settings_for(options: HostileOptions, keys: tuple[str, str]) -> dict[str, str]:
    body = options.prompt_list * len('"word",') + 64 * 1024  # NOTE: the huge list is read
    return {
        "api_keys": ",".join(keys),
        "client_timeout_seconds": str(options.client_timeout),
        "max_waiting": str(options.serve.max_waiting),
        "max_body_bytes": str(max(1 << 20, body)),
    }


def bench_hostile(
    options: HostileOptions, log: Callable[[str], None]
) -> tuple[dict[str, Any], HostileFigures]:
    keys = ("victim-" + secrets.token_hex(12), "attacker-" + secrets.token_hex(12))
    parallel = options.serve.parallel or DEFAULT_PARALLEL
    context = options.serve.context_length or DEFAULT_CONTEXT
    log("starting reame serve on 127.0.0.1 (two keys: a victim's and an attacker's)")
    server = ServeProcess(serve_args(options.serve, parallel, context), settings_for(options, keys))
    attacker: AttackerProcess | None = None
    try:
        model = first_model(server.url, {"Authorization": f"Bearer {keys[0]}"})
        max_places = parallel + options.serve.max_waiting
        plan = AttackPlan(
            server.port, keys[1], model, options.attacks, options.client_timeout, max_places,
            options.seconds, options.prompt_list, options.flood, options.stalled, options.slow,
            options.idle, stall_tokens=context - 200, seed=options.seed,
        )  # fmt: skip
        attacker = AttackerProcess(plan, server.state_dir / "attacker.log")
        bound = 2 * options.rounds * (options.seconds + ATTACKER_GRACE_S) + OVERALL_SLACK_S
        figures = asyncio.run(
            asyncio.wait_for(run(server, attacker, model, keys[0], options, log), bound)
        )
    finally:
        if attacker is not None:
            attacker.stop()
        code = server.stop()
    figures.server_exit_code = code
    figures.server_errors = server.error_lines()
    header = {
        "server": f"reame serve on {server.url} (pid {server.pid})",
        "model": model,
        "parallel": parallel,
        "max_waiting": options.serve.max_waiting,
        "places (parallel + max_waiting); one key's share": f"{max_places}; "
        f"{-(-max_places // 2)} (at the default key_share, 0.5)",
        "max_connections": f"{Settings.model_fields['max_connections'].default} (the default)",
        "context_length": context,
        "client_timeout_seconds": options.client_timeout,
        "seconds each phase": options.seconds,
        "rounds (quiet, then hostile)": options.rounds,
        "victim": f"{options.clients} clients back to back, chats of 16 tokens",
        "attacks": describe(plan),
        "server log": str(server.log_path),
        "attacker log": str(attacker.log_path) if attacker else "",
    }
    return header, figures


def describe(plan: AttackPlan) -> str:
    sizes = {
        "prompts": f"prompts (2 senders: {plan.prompt_list} prompts n 8, {plan.max_places} n 8)",
        "flood": f"flood ({plan.flood} at once, {plan.flood_pause} s after a refusal)",
        "stalled": f"stalled ({plan.stalled} streams never read, 20 logprobs a token)",
        "slow": f"slow ({plan.slow} senders, a byte every 0.5x / 1.5x client_timeout)",
        "idle": f"idle ({plan.idle} connections)",
    }
    return ", ".join(sizes[name] for name in plan.attacks)


async def chat_ok(base: str, key: str, model: str, index: int) -> bool:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        try:
            response = await c.post(base + CHAT_PATH, json=short_chat(model, 0, index))
        except httpx.HTTPError:
            return False
        return response.status_code == 200


async def metrics_now(base: str) -> dict[str, float]:
    return await asyncio.to_thread(read_metrics, base)


def report_of(line: str, earlier: dict[str, Any]) -> dict[str, Any]:
    """The attacker's report of a round (its outcomes are every round's so far); the most
    sockets it held and its errors are kept over the rounds."""
    try:
        report = json.loads(line)
    except ValueError:
        raise BenchTargetError(f"the attacker's report is not JSON: {line[:200]!r}") from None
    report["peak_sockets"] = max(report["peak_sockets"], earlier.get("peak_sockets", 0))
    report["errors"] = [*earlier.get("errors", []), *report["errors"]][:20]
    return report


def add_deltas(total: dict[str, float], before: dict[str, float], after: dict[str, float]) -> None:
    for name, value in after.items():
        total[name] = total.get(name, 0.0) + value - before.get(name, 0.0)


async def run(
    server: ServeProcess, attacker: AttackerProcess, model: str, key: str,
    options: HostileOptions, log: Callable[[str], None],
) -> HostileFigures:  # fmt: skip
    base, pid, seconds, clients = server.url, server.pid, options.seconds, options.clients
    pids = {"server": pid, "attacker": attacker.proc.pid, "bench": os.getpid()}
    if (await attacker.line(60)).strip() != "ready":
        raise BenchTargetError(f"the attacker did not start: see {attacker.log_path}")
    log("warm-up")
    for i in range(WARM_UP_CHATS):
        await chat_ok(base, key, model, i)
    quiets, hostiles, attack = [], [], {}
    deltas: dict[str, dict[str, float]] = {"quiet": {}, "hostile": {}}
    for r in range(options.rounds):
        said = f"round {r + 1} of {options.rounds}: " if options.rounds > 1 else ""
        for phase in ("quiet", "hostile"):
            before = await metrics_now(base)
            if phase == "quiet":
                log(f"{said}quiet: {clients} victim clients for {seconds:.0f} s, the attacker idle")
            else:
                log(f"{said}hostile: the same victim load for {seconds:.0f} s, the attacker on")
                attacker.go()
            first = (1 + r) * 10_000_000 + (phase == "hostile") * 5_000_000
            watched = await watch(phase, base, key, model, pids, seconds, clients, first)
            (quiets if phase == "quiet" else hostiles).append(watched)
            if phase == "hostile":
                attack = report_of(await attacker.line(ATTACKER_GRACE_S), attack)
            add_deltas(deltas[phase], before, await metrics_now(base))
    log("over; waiting for the slots to be freed")
    freed = await wait_freed(base, {})
    figures = HostileFigures(
        quiet=Phase.merged(quiets),
        hostile=Phase.merged(hostiles),
        attack=attack,
        server_quiet=server_counts({}, deltas["quiet"]),
        server_hostile=server_counts({}, deltas["hostile"]),
        freed_after_s=freed,
        answers_after=await chat_ok(base, key, model, 30_000_000),
        rss_after_mb=proc_figures(pid)[0],
    )
    figures.server_5xx_total = server_counts({}, await metrics_now(base)).num_5xx
    return figures
