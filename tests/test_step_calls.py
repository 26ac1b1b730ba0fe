"""A step whose sequences compute unequal numbers of tokens, on the real SmolLM2: each part gets
the logits it gets alone (llama.cpp would cut a 64-token chunk beside a decode token into 1 + 63,
and the 63 round otherwise: logits 0.48 apart, measured before the runner decoded by size). And
two equal prompt chunks on Gemma 3, whose repacked weights take a batch's rows in groups of 4:
the second's rows would be grouped otherwise than alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from reame.engine.exact_run import row_granule
from reame.engine.exact_steps import ExactPaths
from reame.engine.kv_moves import KVMoves
from reame.engine.runner import Runner
from reame.engine.step_plan import Part, StepPlan
from reame.llama.context import Context, ContextShape, DecodeInterrupted
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


@dataclass
class Seq:
    """What the runner reads of a sequence, and its mark where a step computed it otherwise."""

    slot: int
    num_computed: int
    num_prompt: int
    is_exact: bool = True

    def computed_otherwise(self) -> None:
        self.is_exact = False


def part(slot: int, tokens: tuple[int, ...], first_row: int) -> Part:
    seq = Seq(slot, len(PREFIX), len(PREFIX) + len(tokens))
    return Part(seq, len(PREFIX), tokens, 0, 0, True, first_row)  # type: ignore[arg-type]


def with_prefix(context: Context, slots: tuple[int, ...]) -> None:
    n = len(PREFIX)
    for slot in slots:
        context.clear(slot)
        for start in range(0, n, 128):
            chunk = PREFIX[start : start + 128]
            context.decode(chunk, list(range(start, start + len(chunk))), [slot] * len(chunk),
                           [False] * len(chunk))  # fmt: skip


@pytest.mark.model
def test_a_prompt_chunk_beside_another_sequences_decode_token_gets_its_logits_alone(
    context: Context,
) -> None:
    n = len(PREFIX)
    with_prefix(context, (0, 1))
    runner = Runner(KVMoves(context))  # type: ignore[arg-type]
    chunk_alone = np.array(runner.run(StepPlan((part(1, CHUNK, 0),))).logits(63), copy=True)
    context.remove(1, n)
    token_alone = np.array(runner.run(StepPlan((part(0, (5,), 0),))).logits(0), copy=True)
    context.remove(0, n)

    together = runner.run(StepPlan((part(0, (5,), 0), part(1, CHUNK, 1))))
    assert np.array_equal(together.logits(0), token_alone)
    assert np.array_equal(together.logits(64), chunk_alone)


@pytest.mark.model
def test_a_step_stopped_in_its_second_call_keeps_nothing_and_runs_again_as_it_runs_whole(
    context: Context,
) -> None:
    """An idle-time step stopped for a request that came (Runner.run's interrupt): llama.cpp
    drops the stopped batch, the runner the batch it computed before it, so each sequence's KV
    is as it was; computed again, the step gives the logits of a step never stopped (a position
    left behind would make llama.cpp refuse the batch)."""
    n = len(PREFIX)
    with_prefix(context, (0, 1))
    runner = Runner(KVMoves(context))  # type: ignore[arg-type]
    asked = [0]

    def counts() -> bool:
        asked[0] += 1
        return False

    token_alone = np.array(runner.run(StepPlan((part(0, (5,), 0),)), counts).logits(0))
    first_call = asked[0]  # the checks a one-token decode makes: one before each operation
    context.remove(0, n)
    whole = runner.run(StepPlan((part(0, (5,), 0), part(1, CHUNK, 1))))
    whole_logits = [np.array(whole.logits(0)), np.array(whole.logits(64))]
    assert np.array_equal(whole_logits[0], token_alone)
    for slot in (0, 1):
        context.remove(slot, n)

    asked[0] = 0

    def in_the_second_call() -> bool:
        asked[0] += 1
        return asked[0] > first_call + 5

    plan = StepPlan((part(0, (5,), 0), part(1, CHUNK, 1)))
    with pytest.raises(DecodeInterrupted):
        runner.run(plan, in_the_second_call)
    assert first_call < asked[0] < 3 * first_call  # stopped early in the chunk's decode
    again = runner.run(plan)
    assert np.array_equal(again.logits(0), whole_logits[0])
    assert np.array_equal(again.logits(64), whole_logits[1])


@pytest.mark.model
def test_equal_prompt_chunks_whose_rows_would_group_otherwise_are_computed_apart(
    gemma_path: Path,
) -> None:
    """70 rows each: beside the first, the second's rows start at row 70 of the batch, 2 into a
    group of 4, and its last rows fall in a whole group where alone they are left over (logits
    apart before the runner computed them apart; the test fails without)."""
    model = Model(gemma_path)
    context = Context(model, ContextShape(2 * 1024, 256, 2, 2))
    try:
        paths = ExactPaths(granule=row_granule(context))
        assert paths.granule == 4  # measured: Gemma 3's Q4_K_M file
        wide = tuple(200 + (i * 5) % 250 for i in range(70))
        runner = Runner(KVMoves(context), paths)  # type: ignore[arg-type]
        with_prefix(context, (0, 1))
        n = len(PREFIX)
        alone = []
        for slot in (0, 1):
            alone.append(np.array(runner.run(StepPlan((part(slot, wide, 0),))).logits(69)))
            context.remove(slot, n)
        first, second = part(0, wide, 0), part(1, wide, 70)
        together = runner.run(StepPlan((first, second)))
        assert np.array_equal(together.logits(69), alone[0])
        assert np.array_equal(together.logits(139), alone[1])
        assert first.seq.is_exact and second.seq.is_exact  # each computed as alone
    finally:
        context.close()
        model.close()
