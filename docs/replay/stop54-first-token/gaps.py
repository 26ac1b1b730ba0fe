"""From a trace_path.py log: for each request, the time from the end of the step that gave its
first token to the frame that carried it; for each answer, from the end of the step that ended
it to the loop's taking its finish (its frame follows within a millisecond)."""

import contextlib
import statistics
import sys

ev = []
with open(sys.argv[1]) as log:
    for line in log:
        t, _, what = line.partition(" ")
        with contextlib.suppress(ValueError):
            ev.append((float(t), what.strip()))
firsts, finishes = [], []
last_run_end = None
waiting = False
for t, w in ev:
    if w.startswith("start <"):
        waiting = True
    elif w.startswith("run >"):
        last_run_end = t
    elif last_run_end is None:
        continue
    elif w.startswith("deliver") and "FinishEvent" in w:
        finishes.append(1000 * (t - last_run_end))
    elif (
        waiting
        and w.startswith("frame")
        and ("reasoning_content" in w or '"content":"' in w)
        and '"content":""' not in w
    ):
        waiting = False
        firsts.append(1000 * (t - last_run_end))
for name, gaps in (("first frame", firsts), ("finish taken", finishes)):
    print(
        f"{sys.argv[1]}: step end to {name}, {len(gaps)}: median {statistics.median(gaps):.1f}"
        f" ms, mean {statistics.mean(gaps):.1f} ms, max {max(gaps):.1f}"
    )
