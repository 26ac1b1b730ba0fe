"""Later turns' first token by turn (medians) and their mean, Reame and llama-server, of
bench --replay --out directories. Usage: python3 by_turn.py OUT [OUT ...]"""

import json
import statistics
import sys
from pathlib import Path

for out in sys.argv[1:]:
    records = json.loads(Path(out, "per_request.json").read_text())["records"]
    for mode in ("one-client", "one-client-restart"):
        line = [Path(out).name, mode]
        for server in ("reame", "llama-server"):
            rows = [r for r in records if r["server"] == server and r["mode"] == mode]
            by = {t: [r["ttft"] for r in rows if r["turn"] == t] for t in (2, 3)}
            later = by[2] + by[3]
            line.append(
                f"{server}: turn 2 {statistics.median(by[2]):.2f} s, turn 3 "
                f"{statistics.median(by[3]):.2f} s, mean {statistics.mean(later):.3f} s"
            )
        print(" | ".join(line))
