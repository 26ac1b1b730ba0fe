"""A narrow chunk of n tokens against the tiled 64 ending where it ends, at position P (median of 5)."""
import statistics, sys, time
from pathlib import Path
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model
model = Model(Path(sys.argv[1]))
P = int(sys.argv[2])
context = Context(model, ContextShape(16384, 512, 4, 2))
tokens = list(range(1000, 1000 + P + 100))
for a in range(0, P, 512):
    b = min(P, a + 512)
    context.decode(tokens[a:b], list(range(a, b)), [0] * (b - a), [False] * (b - a - 1) + [True])
def cost(start, end):
    times = []
    for _ in range(5):
        context.remove(0, start)
        t = time.perf_counter()
        n = end - start
        context.decode(tokens[start:end], list(range(start, end)), [0] * n, [False] * (n - 1) + [True])
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)
for n in [int(x) for x in sys.argv[3:]]:
    end = P + n
    # keep [P-64+n, P) as computed: the widened chunk recomputes from end-64
    print(f"n={n}: narrow {cost(P, end):.0f} ms, tiled 64 {cost(end - 64, end):.0f} ms", flush=True)
