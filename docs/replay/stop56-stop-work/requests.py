"""Reame's requests of bench --replay --out directories, by mode: (turn, prompt tokens computed,
time to first token in s). Usage: python3 requests.py OUT [OUT ...]"""

import json
import sys
from pathlib import Path

for out in sys.argv[1:]:
    records = json.loads(Path(out, "per_request.json").read_text())["records"]
    for mode in ("one-client", "one-client-restart"):
        rows = [r for r in records if r["server"] == "reame" and r["mode"] == mode]
        computed = [r["prompt_tokens"] - r["cached_tokens"] for r in rows]
        shown = [(r["turn"], c, round(r["ttft"], 2)) for r, c in zip(rows, computed, strict=True)]
        print(Path(out).name, mode, shown)
