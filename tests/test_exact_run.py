"""The exact-run probe on a fake context whose batches of `rounds_from` tokens or more give
other logits, as llama.cpp's kernels do past a machine's threshold: model-free."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fake_llama import FakeContext, FakeModel
from reame.engine.engine import Engine
from reame.engine.exact_run import PROBE_LIMIT, longest_exact_run
from reame.llama.context import ContextShape
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation

SHAPE = ContextShape(num_cells=256, batch_size=32, num_sequences=2, num_threads=1)


class RoundsOtherwise(FakeContext):
    rounds_from: int = 0  # 0: never

    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int],
        wants_logits: Sequence[bool],
    ) -> None:
        super().decode(tokens, positions, seq_ids, wants_logits)
        if self.rounds_from and len(tokens) >= self.rounds_from:
            for row in self._rows.values():
                row[0] += 1e-6  # a last-bit difference, as another summation order gives


@pytest.mark.parametrize("rounds_from", [2, 4, 8, 0])
def test_the_probe_finds_the_longest_run_that_rounds_as_single_steps(rounds_from: int) -> None:
    context = RoundsOtherwise(SHAPE, can_cut=False)
    context.rounds_from = rounds_from
    found = longest_exact_run(context, [5, 6, 7], list(range(10, 10 + PROBE_LIMIT)), seq_id=1)
    assert found == (rounds_from - 1 if rounds_from else PROBE_LIMIT)
    assert context.kv[1] == []  # the sequence it used is empty again


@pytest.mark.parametrize(("rounds_from", "max_length"), [(4, 2), (2, 0), (0, 32)])
def test_the_engine_keeps_drafts_within_what_the_probe_measured(
    rounds_from: int, max_length: int
) -> None:
    context = RoundsOtherwise(SHAPE, can_cut=False)
    context.rounds_from = rounds_from
    controller = SpecController(mode="on", max_length=32)
    engine = Engine(FakeModel(), context, 128, speculation=Speculation(controller))  # type: ignore[arg-type]
    engine.start()
    try:
        assert controller.max_length == max_length
        assert engine.exact_run == (rounds_from - 1 if rounds_from else PROBE_LIMIT)
    finally:
        engine.close()
