"""How many tokens of one sequence a batch may hold and still give, row for row, the logits that
computing them one at a time gives: measured on the context itself, before it serves.

llama.cpp's CPU kernels take other paths for larger batches, and the path depends on the
machine: on an Intel Sapphire Rapids VM a batch of up to 7 tokens of a synthetic Qwen3.5 2B
was bit-identical to one-token steps, on an AMD EPYC VM only up to 3 (its Qwen2.5 7B too:
logits 0.59 apart at 4). A verify run longer than that can change greedy output (a near tie
decided by rounding), so the engine keeps verify runs within what this probe measured.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import structlog

from reame.engine.kv_context import KVContext
from reame.speculation.controller import SpecController

PROBE_LIMIT = 8  # the longest run measured; beyond it the drafters' own limits apply
# what the probe feeds the model: any ids every vocabulary has (the kernels' paths depend on
# the batch's shape, not on which tokens are in it)
_PROBE_PROMPT = [2, 3, 4]
_PROBE_RUN = list(range(10, 10 + PROBE_LIMIT))
log = structlog.get_logger("reame.engine")


def cap_verify_runs(context: KVContext, controller: SpecController) -> int:
    """Measure the longest exact run here and keep the controller's drafts within it."""
    exact_run = longest_exact_run(context, _PROBE_PROMPT, _PROBE_RUN)
    if exact_run < PROBE_LIMIT:
        controller.max_length = min(controller.max_length, exact_run - 1)
        log.info(
            "verify runs kept short: longer batches round otherwise here",
            max_run=exact_run,
            max_drafts=controller.max_length,
        )
    return exact_run


def longest_exact_run(
    context: KVContext, prompt: Sequence[int], probe: Sequence[int], seq_id: int = 0
) -> int:
    """The largest k <= len(probe) such that a batch of probe[:j] after `prompt` gives the same
    logits, row for row, as computing the j tokens one at a time, for every j <= k (1 at
    least: one token is what decoding does). Uses sequence `seq_id` and empties it; the prompt
    is computed again before each batch, so that nothing is asked of memory that cannot be cut."""
    alone = []
    _start(context, prompt, seq_id)
    for i, token in enumerate(probe):
        context.decode([token], [len(prompt) + i], [seq_id], [True])
        alone.append(np.array(context.logits(0), copy=True))
    exact = 1
    try:
        for k in range(2, len(probe) + 1):
            _start(context, prompt, seq_id)
            positions = list(range(len(prompt), len(prompt) + k))
            context.decode(probe[:k], positions, [seq_id] * k, [True] * k)
            if not all(np.array_equal(context.logits(j), alone[j]) for j in range(k)):
                break
            exact = k
    finally:
        context.clear(seq_id)
    return exact


def _start(context: KVContext, prompt: Sequence[int], seq_id: int) -> None:
    context.clear(seq_id)
    n = len(prompt)
    context.decode(prompt, list(range(n)), [seq_id] * n, [False] * (n - 1) + [True])
