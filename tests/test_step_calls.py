"""A step whose sequences compute unequal numbers of tokens, on the real SmolLM2: each part gets
the logits it gets alone (llama.cpp would cut a 64-token chunk beside a decode token into 1 + 63,
and the 63 round otherwise: logits 0.48 apart, measured before the runner decoded by size)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from reame.engine.kv_moves import KVMoves
from reame.engine.runner import Runner
from reame.engine.step_plan import Part, StepPlan
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

PREFIX = [100 + (i * 7) % 300 for i in range(300)]
CHUNK = tuple(200 + (i * 3) % 250 for i in range(64))


@pytest.fixture(scope="module")
def context(smollm2_path: Path):
    model = Model(smollm2_path)
    ctx = Context(model, ContextShape(2 * 1024, 128, 2, 2))
    yield ctx
    ctx.close()
    model.close()


def part(slot: int, tokens: tuple[int, ...], first_row: int) -> Part:
    seq = SimpleNamespace(slot=slot, num_computed=len(PREFIX), num_prompt=len(PREFIX) + 64)
    return Part(seq, len(PREFIX), tokens, 0, 0, True, first_row)  # type: ignore[arg-type]


@pytest.mark.model
def test_a_prompt_chunk_beside_another_sequences_decode_token_gets_its_logits_alone(
    context: Context,
) -> None:
    n = len(PREFIX)
    for slot in (0, 1):
        context.clear(slot)
        for start in range(0, n, 128):
            chunk = PREFIX[start : start + 128]
            context.decode(chunk, list(range(start, start + len(chunk))), [slot] * len(chunk),
                           [False] * len(chunk))  # fmt: skip
    runner = Runner(KVMoves(context))  # type: ignore[arg-type]
    chunk_alone = np.array(runner.run(StepPlan((part(1, CHUNK, 0),))).logits(63), copy=True)
    context.remove(1, n)
    token_alone = np.array(runner.run(StepPlan((part(0, (5,), 0),))).logits(0), copy=True)
    context.remove(0, n)

    together = runner.run(StepPlan((part(0, (5,), 0), part(1, CHUNK, 1))))
    assert np.array_equal(together.logits(0), token_alone)
    assert np.array_equal(together.logits(64), chunk_alone)
