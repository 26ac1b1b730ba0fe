"""Chosen chunkings of one prompt against one chunk, a run of one-token steps, and what prefill and
decode cost, with flash attention off (0) or on (1). Usage: flash_attn_off.py 0|1 [MODEL]."""

import statistics
import sys
import time

import numpy as np
from contexts import context, random_tokens, run

from reame.llama.context import ContextShape

fa = int(sys.argv[1])
ctx = context(fa, sys.argv[2] if len(sys.argv) > 2 else "smol", ContextShape(8192, 1024, 2, 2))
rng = np.random.default_rng(0)
N = 700
tokens = random_tokens(ctx, N, rng)


def run_cut(cuts):
    bounds = [0, *cuts, N]
    return run(ctx, tokens, [b - a for a, b in zip(bounds, bounds[1:], strict=False)])


ref = run_cut([512])
for cuts in (
    [256, 512],
    [512, 690],
    [512, 698],
    [600],
    [640],
    [680],
    [690],
    [695],
    [699],
    [512, 600, 650],
    [100, 200, 300, 400, 500, 600],
):
    out = run_cut(cuts)
    d = float(np.max(np.abs(out - ref)))
    print(fa, cuts, "identical" if d == 0 else f"apart {d:.4f}", flush=True)
# one-token steps at the end
ctx.clear(0)
ctx.decode(tokens[:690], list(range(690)), [0] * 690, [False] * 689 + [True])
for p in range(690, N):
    ctx.decode([tokens[p]], [p], [0], [True])
print(
    fa,
    "one at a time 690..700",
    "identical"
    if float(np.max(np.abs(ctx.logits(0) - ref))) == 0
    else f"apart {float(np.max(np.abs(ctx.logits(0) - ref))):.4f}",
)
# prefill cost
for n in (21, 64, 512):
    ts = []
    for _ in range(5):
        ctx.clear(0)
        ctx.decode(tokens[:180], list(range(180)), [0] * 180, [False] * 179 + [True])
        t = time.perf_counter()
        ctx.decode(
            tokens[180 : 180 + n], list(range(180, 180 + n)), [0] * n, [False] * (n - 1) + [True]
        )
        ts.append(time.perf_counter() - t)
    print(fa, f"chunk {n} at 180: {1000 * statistics.median(ts):.1f} ms", flush=True)
ts = []
for _ in range(5):
    ctx.clear(0)
    ctx.decode(tokens[:600], list(range(600)), [0] * 600, [False] * 599 + [True])
    t = time.perf_counter()
    for p in range(600, 620):
        ctx.decode([tokens[p]], [p], [0], [True])
    ts.append((time.perf_counter() - t) / 20)
print(fa, f"decode at 600: {1000 * statistics.median(ts):.2f} ms/token")
