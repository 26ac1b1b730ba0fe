"""Each later turn of run12.sh's OUT directories: (request, first token s, the server's call
start after the send, the reuse match after the send, its own step, the match). A match long
after the call's start is a wait for the engine. Usage: python3 waits.py OUT [OUT ...]"""

import contextlib
import json
import statistics
import sys
from pathlib import Path

for out in sys.argv[1:]:
    records = json.loads(Path(out, "out.json").read_text())
    lines = []
    for line in Path(out, "trace.err").read_text().splitlines():
        at, _, what = line.partition(" ")
        with contextlib.suppress(ValueError):
            lines.append((float(at), what.strip()))
    rows = []
    for r in records:
        if r["turn"] == 1:
            continue
        path = [(t - r["t0"], w) for t, w in lines if r["t0"] <= t <= r["first"] + 0.01]
        start = next(t for t, w in path if w.startswith("start <"))
        match, found = next((t, w[8:]) for t, w in path if w.startswith("match >"))
        own = [t for t, w in path if w.startswith("run >")][-1]
        rows.append((r["i"], *(round(x, 3) for x in (r["ttft"], start, match, own - match)), found))
    print(Path(out).name, "median", round(statistics.median(r[1] for r in rows), 3))
    for row in rows:
        print(" ", row)
