"""What a sequence state read costs at the 1.7B shape: bytearray + llama_state_seq_get_data."""

import sys
import time

import reame.llama.binding as b
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

lc = b.lc if hasattr(b, "lc") else None
path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 572
m = Model(__import__("pathlib").Path(path))
ctx = Context(m, ContextShape(4096, 512, 4, 2))
toks = [(i * 7919) % 30000 + 100 for i in range(n)]
for a in range(0, n, 512):
    part = toks[a : a + 512]
    ctx.decode(
        part, list(range(a, a + len(part))), [0] * len(part), [False] * (len(part) - 1) + [True]
    )
for _ in range(5):
    t = time.perf_counter()
    data = ctx.save_state(0)
    t1 = time.perf_counter()
    print(f"save_state {len(data) / 1e6:.1f} MB {1000 * (t1 - t):.1f} ms")
    t = time.perf_counter()
    x = bytearray(len(data))
    t1 = time.perf_counter()
    print(f"  bytearray alone {1000 * (t1 - t):.1f} ms")
    del x
    t = time.perf_counter()
    ok = ctx.load_state(1, data)
    t1 = time.perf_counter()
    print(f"  load_state {1000 * (t1 - t):.1f} ms ok {ok}")
    del data
