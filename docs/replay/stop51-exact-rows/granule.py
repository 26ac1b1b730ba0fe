"""The row groups the engine measures at start (engine/exact_run.py row_granule), and what the
probe costs (median of 3). Usage: granule.py MODEL."""

import sys
import time
from pathlib import Path

from reame.engine.exact_run import row_granule
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

ctx = Context(Model(Path(sys.argv[1])), ContextShape(4096, 512, 4, 2))
row_granule(ctx)
ts = []
for _ in range(3):
    t = time.perf_counter()
    g = row_granule(ctx)
    ts.append(time.perf_counter() - t)
print(Path(sys.argv[1]).name, "granule", g, "seconds", sorted(ts)[1], flush=True)
