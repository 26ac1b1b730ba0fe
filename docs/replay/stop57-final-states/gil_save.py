"""Reading a sequence's state with and without the GIL: a ticker thread's longest gap while
Context.save_state runs, against the same read into a zero-filled bytearray(size) (the code
before), at a model's shape with 600 tokens in the sequence.
Usage: PYTHONPATH=TREE/app python3 gil_save.py MODEL.gguf"""

import ctypes
import statistics
import sys
import threading
import time
from pathlib import Path

from reame.llama.binding import lc
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

ctx = Context(Model(Path(sys.argv[1])), ContextShape(16384, 512, 4, 2))
tokens = [100 + i % 500 for i in range(600)]
for a, b in ((0, 512), (512, 600)):
    ctx.decode(tokens[a:b], list(range(a, b)), [0] * (b - a), [False] * (b - a - 1) + [True])


def zero_filled(seq_id: int) -> bytearray:
    size = lc.llama_state_seq_get_size_ext(ctx._ptr, seq_id, 0)
    data = bytearray(size)
    view = (ctypes.c_uint8 * size).from_buffer(data)
    lc.llama_state_seq_get_data_ext(ctx._ptr, view, size, seq_id, 0)
    del view
    return data


def timed(read) -> tuple[float, float]:
    gaps, stop = [], threading.Event()

    def tick() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.05)
    start = time.perf_counter()
    read(0)
    took = time.perf_counter() - start
    time.sleep(0.02)
    stop.set()
    ticker.join()
    return took, max(gaps)


assert zero_filled(0) == ctx.save_state(0)
for name, read in (("zero-filled (before)", zero_filled), ("save_state (now)", ctx.save_state)):
    runs = [timed(read) for _ in range(7)]
    took, gap = (statistics.median(r[i] for r in runs) for i in (0, 1))
    print(f"{name}: {took * 1000:.1f} ms, longest gap {gap * 1000:.1f} ms (medians of 7)")
