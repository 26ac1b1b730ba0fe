"""The steps of ../stop57-final-states/run12.sh's OUT directories that are not one-token decodes,
in order, beside each submit (marked when it came during a step) and each reuse match: where a
history computed ahead started, how many tokens it computed, and how long a later turn waited
for it. Times in s from the first request's send. Usage: python3 history_steps.py OUT [OUT ...]"""

import contextlib
import json
import sys
from pathlib import Path

for out in sys.argv[1:]:
    t0 = json.loads(Path(out, "out.json").read_text())[0]["t0"]
    print(Path(out).name)
    began = None
    for line in Path(out, "trace.err").read_text().splitlines():
        at, _, what = line.partition(" ")
        with contextlib.suppress(ValueError):
            t, what = float(at) - t0, what.strip()
            if what.startswith("run <"):
                began = t
            elif what.startswith("run >"):
                parts = what[6:]
                if not (parts.count("(") == 1 and parts.endswith(", 1)]")):
                    print(f"  {began:7.2f}-{t:7.2f} ({t - began:.2f} s) step {parts}")
                began = None
            elif what.startswith("submit <"):
                during = f" during the step begun at {began:.2f}" if began is not None else ""
                print(f"  {t:7.2f} submit{during}")
            elif what.startswith("match >"):
                print(f"  {t:7.2f}   match {what[8:]}")
