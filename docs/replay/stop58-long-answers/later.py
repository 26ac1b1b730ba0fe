"""Later turns (2 and 3) of run12.sh's or llama12.sh's OUT directories: their median first
token, and each (request, turn, tokens computed, first token s). Usage: python3 later.py OUT..."""

import json
import statistics
import sys
from pathlib import Path

for out in sys.argv[1:]:
    records = [r for r in json.loads(Path(out, "out.json").read_text()) if r["turn"] > 1]
    rows = [(r["i"], r["turn"], r["prompt"] - r["cached"], round(r["ttft"], 3)) for r in records]
    print(Path(out).name, "median", round(statistics.median(r[3] for r in rows), 3), rows)
