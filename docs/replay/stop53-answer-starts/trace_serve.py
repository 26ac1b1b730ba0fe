"""`reame serve` with each reuse match and each step logged to stderr (CLOCK_MONOTONIC seconds,
comparable with a client's time.perf_counter on the same machine).
Usage: python3 trace_serve.py serve [flags]."""

import sys
import time

import reame.engine.reuse_index as reuse_index
import reame.engine.runner as runner
from reame.cli.main import main

matched = reuse_index.ReuseIndex.match
ran = runner.Runner.run


def match(self, seq, warming=()):
    m = matched(self, seq, warming)
    r = seq.request
    tier, length = (m.tier, m.length) if m else (None, 0)
    print(
        f"{time.perf_counter():12.3f} MATCH {r.request_id[-6:]} n {seq.num_prompt} tier {tier}",
        f"len {length} cold {list(r.cold_cuts)}",
        file=sys.stderr,
        flush=True,
    )
    return m


def run(self, plan):
    started = time.perf_counter()
    out = ran(self, plan)
    parts = [
        (p.seq.slot, p.start, len(p.tokens), p.seq.request.request_id[-6:]) for p in plan.parts
    ]
    ms = 1000 * (time.perf_counter() - started)
    print(f"{time.perf_counter():12.3f} STEP {ms:7.1f} ms {parts}", file=sys.stderr, flush=True)
    return out


reuse_index.ReuseIndex.match = match
runner.Runner.run = run
sys.exit(main(sys.argv[1:]))
