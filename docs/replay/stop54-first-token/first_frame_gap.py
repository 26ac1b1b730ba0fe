"""From a trace_path.py log: for each request, the time from the end of the step that gave its
first token to the frame that carried it."""

import contextlib
import statistics
import sys

ev = []
with open(sys.argv[1]) as log:
    for line in log:
        t, _, what = line.partition(" ")
        with contextlib.suppress(ValueError):
            ev.append((float(t), what.strip()))
gaps = []
last_run_end = None
waiting = False
for t, w in ev:
    if w.startswith("start <"):
        waiting = True
    elif w.startswith("run >"):
        last_run_end = t
    elif (
        waiting
        and w.startswith("frame")
        and ("reasoning_content" in w or '"content":"' in w)
        and '"content":""' not in w
    ):
        waiting = False
        if last_run_end is not None:
            gaps.append(1000 * (t - last_run_end))
n = len(gaps)
print(
    f"{sys.argv[1]}: {n} requests; step end to first frame median {statistics.median(gaps):.1f}"
    f" ms, mean {statistics.mean(gaps):.1f} ms, max {max(gaps):.1f}"
)
