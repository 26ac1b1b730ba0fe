"""Each request's turn and time to first token from ../stop49-queue-bound/oneclient.sh OUT
directories (out.json), with the later turns' median and mean."""

import json
import statistics
import sys

for out in sys.argv[1:]:
    with open(f"{out}/out.json") as file:
        records = json.load(file)
    later = [r["ttft"] for r in records if r["turn"] > 1]
    turns = " ".join(f"{r['turn']}:{r['ttft']:.2f}" for r in records)
    computed = [r["prompt"] - r["cached"] for r in records if r["turn"] > 1]
    print(
        f"{out}: later turns median {statistics.median(later):.3f} s, mean "
        f"{statistics.mean(later):.3f} s, max {max(later):.2f} s; computed {computed}; {turns}"
    )
