"""What computing two equal prompt chunks apart costs against one llama_decode of both (the
runner now does so where side by side they would round otherwise), and how far apart the second
chunk's logits are side by side. Median of 7. Usage: python3 apart_cost.py MODEL.gguf [WIDTH...]"""

import statistics
import sys
import time

import numpy as np

from reame.engine.exact_run import row_granule
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

PREFIX = [100 + (i * 7) % 300 for i in range(300)]
model = Model(sys.argv[1])
context = Context(model, ContextShape(2 * 1024, 256, 2, 2))
print("granule", row_granule(context))


def prefix(slot: int) -> None:
    context.clear(slot)
    for start in range(0, len(PREFIX), 128):
        chunk = PREFIX[start : start + 128]
        context.decode(chunk, list(range(start, start + len(chunk))), [slot] * len(chunk),
                       [False] * len(chunk))  # fmt: skip


def run(width: int, together: bool) -> tuple[float, np.ndarray]:
    chunk = [200 + (i * 5) % 250 for i in range(width)]
    positions = list(range(len(PREFIX), len(PREFIX) + width))
    wants = [False] * (width - 1) + [True]
    for slot in (0, 1):
        context.remove(slot, len(PREFIX))
    started = time.perf_counter()
    if together:
        context.decode(chunk * 2, positions * 2, [0] * width + [1] * width, wants * 2)
        last = np.array(context.logits(2 * width - 1))
    else:
        for slot in (0, 1):
            context.decode(chunk, positions, [slot] * width, wants)
        last = np.array(context.logits(width - 1))
    return time.perf_counter() - started, last


prefix(0)
prefix(1)
for width in [int(w) for w in sys.argv[2:]] or [70, 12]:
    times = {True: [], False: []}
    for _ in range(7):
        for together in (True, False):
            seconds, last = run(width, together)
            times[together].append(seconds)
            if together:
                side = last
            else:
                alone = last
    one, two = statistics.median(times[True]), statistics.median(times[False])
    gap = float(np.max(np.abs(side - alone)))
    print(f"width {width}: one decode {one * 1000:.1f} ms, apart {two * 1000:.1f} ms "
          f"({two / one:.2f}x); second chunk's last logits apart by {gap:.4f}")  # fmt: skip
context.close()
model.close()
