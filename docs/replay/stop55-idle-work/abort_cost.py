"""A 64-token step at the Qwen3 1.7B shape without and with a Python abort callback (it says
no), alone and beside a thread that wants the GIL. Usage: python3 abort_cost.py MODEL."""

import statistics
import sys
import threading
import time
from pathlib import Path

from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

model = Model(Path(sys.argv[1]))
context = Context(model, ContextShape(4096, 512, 4, 2))
asked = [0]


def says_no() -> bool:
    asked[0] += 1
    return False


tokens = list(range(1000, 1064))


def step() -> float:
    context.remove(0, 0)
    began = time.perf_counter()
    context.decode(tokens, list(range(64)), [0] * 64, [False] * 63 + [True])
    return time.perf_counter() - began


busy = [False]


def wants_the_gil() -> None:  # as an event loop that works now and then
    while busy[0]:
        sum(range(2000))
        time.sleep(0.0005)


def medians(runs: int) -> dict[str, float]:
    out: dict[str, list[float]] = {"none": [], "python": []}
    for _ in range(runs):
        for mode in out:
            context.interrupt_when(says_no if mode == "python" else None)
            out[mode].append(step())
    context.interrupt_when(None)
    return {mode: round(statistics.median(s) * 1000, 1) for mode, s in out.items()}


print("alone, ms", medians(8), "asks per step", asked[0] // 8)
busy[0] = True
thread = threading.Thread(target=wants_the_gil)
thread.start()
print("beside a busy thread, ms", medians(6))
busy[0] = False
thread.join()
