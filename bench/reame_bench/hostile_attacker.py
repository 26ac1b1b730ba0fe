"""The attacking client of `reame bench --hostile`, a process of its own:
`python -m reame_bench.hostile_attacker PLAN_JSON`. It says `ready` on stdout, then sits idle
(sending nothing: the quiet phase's baseline has it beside the server all the same) until a
line `go` on stdin; then it runs its attacks for the plan's seconds, closes every socket, prints
what each attack met so far as one JSON line and is idle again. Any other line, or the end of
stdin, ends it."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable

from reame_bench.hostile_attacks import Record, flood, huge_prompts
from reame_bench.hostile_holds import idle, settle, slow, stalled
from reame_bench.hostile_plan import FLOOD, IDLE, PROMPTS, SLOW, STALLED, AttackPlan
from reame_bench.hostile_wire import Sockets

Worker = Callable[[AttackPlan, Sockets, Record, float, int], Awaitable[None]]
PROMPT_WORKERS = 2


def workers(plan: AttackPlan) -> dict[str, tuple[Worker, int]]:
    """Each attack's worker and how many of them run at once."""
    table: dict[str, tuple[Worker, int]] = {
        PROMPTS: (huge_prompts, PROMPT_WORKERS),
        FLOOD: (flood, plan.flood),
        STALLED: (stalled, plan.stalled),
        SLOW: (slow, plan.slow),
        IDLE: (idle, plan.idle),
    }
    return {name: table[name] for name in plan.attacks}


async def attack(plan: AttackPlan, records: dict[str, Record]) -> dict[str, object]:
    """One round of every attack in the plan; the outcomes so far, every round's."""
    socks = Sockets(plan.port)
    until = time.monotonic() + plan.seconds
    tasks = [
        asyncio.ensure_future(work(plan, socks, records[name], until, k))
        for name, (work, count) in workers(plan).items()
        for k in range(count)
    ]
    try:
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, until - time.monotonic()))
        for task in pending:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        if STALLED in records:
            await settle(socks, records[STALLED])
    finally:
        socks.close_all()
    errors = [
        f"{type(r).__name__}: {r}"
        for r in results
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
    ]
    return {
        "attacks": {name: rec.summary() for name, rec in records.items()},
        "peak_sockets": socks.peak,
        "errors": errors[:20],
    }


def main() -> int:
    plan = AttackPlan.from_json(sys.argv[1])
    records = {name: Record() for name in plan.attacks}
    print("ready", flush=True)
    while sys.stdin.readline().strip() == "go":
        print(json.dumps(asyncio.run(attack(plan, records))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
