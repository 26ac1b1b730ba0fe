"""The exact-run probe (engine/exact_run.py) with flash attention off (0) or on (1).
Usage: flash_attn_probe.py FLASH_ATTN MODEL."""

import sys

from contexts import context

from reame.engine.exact_run import (
    _PROBE_PROMPT,
    _PROBE_RUN,
    exact_neighbours,
    exact_until,
    longest_exact_run,
)
from reame.llama.context import ContextShape

fa, path = int(sys.argv[1]), sys.argv[2]
ctx = context(fa, path, ContextShape(4096, 512, 4, 2))
run = longest_exact_run(ctx, _PROBE_PROMPT, _PROBE_RUN)
print(
    "fa",
    fa,
    "run",
    run,
    "until",
    exact_until(ctx, 320) if run > 1 else 0,
    "neighbours",
    exact_neighbours(ctx, 4),
    flush=True,
)
