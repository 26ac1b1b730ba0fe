"""One prompt of N tokens computed in tiled chunks (64 or more) whose widths are multiples of G,
the last with the rows left over that one chunk has, against one chunk: how many give the same
last logits. Usage: aligned.py FLASH_ATTN MODEL N TRIALS G[,G...]."""

import sys

import numpy as np
from contexts import context, random_tokens, run

from reame.llama.context import ContextShape

fa, path, N, trials = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ctx = context(fa, path, ContextShape(4096, 512, 1, 2))
rng = np.random.default_rng(11)
tokens = random_tokens(ctx, N, rng)
ref = run(ctx, tokens, [N])
for g in [int(x) for x in sys.argv[5].split(",")]:
    same = 0
    for _ in range(trials):
        ws, left = [], N
        while True:
            w = g * int(rng.integers(64 // g, 160 // g + 1))
            if left - w < 64:
                break
            ws.append(w)
            left -= w
        ws.append(left)  # the last: N's residue mod g, as the reference's one chunk
        same += float(np.max(np.abs(run(ctx, tokens, ws) - ref))) == 0
    print(f"fa={fa} N={N} aligned to {g}: {same}/{trials} same", flush=True)
