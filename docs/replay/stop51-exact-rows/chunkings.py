"""One prompt computed in random chunkings (every chunk at least 1, 2, 4 or 64 wide) against one
chunk: how many give the same last logits.
Usage: chunkings.py FLASH_ATTN(0|1) smol|MODEL N TRIALS."""

import sys

import numpy as np
from contexts import context, random_tokens, run

from reame.llama.context import ContextShape

fa, which, N, trials = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ctx = context(fa, which, ContextShape(4096, 512, 1, 2))
rng = np.random.default_rng(1)
tokens = random_tokens(ctx, N, rng)


def split(wmin):
    out, left = [], N
    while left > 0:
        w = int(rng.integers(wmin, 140))
        w = min(w, left, 512)
        if left - w < wmin and left - w > 0:
            w = left
        out.append(w)
        left -= w
    return out


ref = run(ctx, tokens, [min(512, N)] + ([N - 512] if N > 512 else []))
for wmin in (1, 2, 4, 64):
    same = 0
    bad = []
    for _ in range(trials):
        ws = split(wmin)
        d = float(np.max(np.abs(run(ctx, tokens, ws) - ref)))
        same += d == 0
        if d and len(bad) < 2:
            bad.append((ws, round(d, 3)))
    print(f"fa={fa} {which} N={N} min width {wmin}: {same}/{trials} identical", bad, flush=True)
