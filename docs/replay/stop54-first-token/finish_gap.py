"""From a trace_path.py log: for each answer, the time from the end of the step that ended it
to the loop's taking its finish (the frame follows within a millisecond)."""

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
for t, w in ev:
    if w.startswith("run >"):
        last_run_end = t
    elif w.startswith("deliver") and "FinishEvent" in w and last_run_end is not None:
        gaps.append(1000 * (t - last_run_end))
print(
    f"{sys.argv[1]}: {len(gaps)} finishes; step end to the loop taking the finish: median"
    f" {statistics.median(gaps):.1f} ms, mean {statistics.mean(gaps):.1f} ms, max {max(gaps):.1f}"
)
