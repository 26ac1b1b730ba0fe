"""The exact-run probe on a fake context whose batches of `rounds_from` tokens or more give
other logits, as llama.cpp's kernels do past a machine's threshold: model-free."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fake_llama import FakeContext, FakeModel
from reame.engine.engine import Engine
from reame.engine.exact_run import (
    LONG_PROBE,
    PROBE_LIMIT,
    exact_neighbours,
    exact_until,
    longest_exact_run,
    row_granule,
)
from reame.llama.context import ContextShape
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation

SHAPE = ContextShape(num_cells=256, batch_size=32, num_sequences=2, num_threads=1)


class RoundsOtherwise(FakeContext):
    rounds_from: int = 0  # 0: never
    rounds_past: int = 0  # a batch of 2 or more reaching this position rounds otherwise; 0: never
    rounds_beside: int = 0  # a batch of this many sequences or more rounds otherwise; 0: never

    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int],
        wants_logits: Sequence[bool],
    ) -> None:
        super().decode(tokens, positions, seq_ids, wants_logits)
        long = self.rounds_past and len(tokens) > 1 and max(positions) >= self.rounds_past
        one_each = len(set(seq_ids)) == len(seq_ids)
        if one_each and len(seq_ids) > 1:  # a batch of one token of each sequence
            beside = self.rounds_beside and len(seq_ids) >= self.rounds_beside
            long, rounds_from = bool(beside), 0
        else:
            rounds_from = self.rounds_from
        if (rounds_from and len(tokens) >= rounds_from) or long:
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
        assert engine.paths.run == (rounds_from - 1 if rounds_from else None)  # None: no limit
    finally:
        engine.close()


@pytest.mark.parametrize("can_cut", [True, False])
@pytest.mark.parametrize("rounds_past", [256, 100, 300, 5, 0])
def test_the_probe_finds_where_a_long_context_stops_rounding_as_single_steps(
    rounds_past: int, can_cut: bool
) -> None:
    """As llama.cpp's f16 attention past 256 cells: found by bisection (from the start again
    where memory cannot be cut), the first position a run may not reach; None past the probe."""
    context = RoundsOtherwise(SHAPE, can_cut=can_cut)
    context.rounds_past = rounds_past
    found = exact_until(context, 200 if rounds_past != 300 else 250, seq_id=1)
    assert found == (rounds_past if rounds_past and rounds_past <= 200 else None)
    assert context.kv[1] == []


def test_the_engine_keeps_drafts_before_where_runs_stop_being_exact() -> None:
    context = RoundsOtherwise(ContextShape(2048, 64, 2, 1), can_cut=True)
    context.rounds_past = 256
    controller = SpecController(mode="on", max_length=32)
    engine = Engine(FakeModel(), context, 1024, speculation=Speculation(controller))  # type: ignore[arg-type]
    engine.start()
    try:
        assert controller.exact_until == 256 and LONG_PROBE > 256
    finally:
        engine.close()


@pytest.mark.parametrize(("rounds_beside", "found"), [(0, 4), (2, 1), (3, 2), (4, 3)])
def test_the_probe_finds_how_many_sequences_a_batch_may_hold_and_stay_exact(
    rounds_beside: int, found: int
) -> None:
    """One token of each of m sequences in one batch: as many as give each its lone logits."""
    context = RoundsOtherwise(ContextShape(512, 32, 4, 1), can_cut=True)
    context.rounds_beside = rounds_beside
    assert exact_neighbours(context, 4) == found
    assert all(context.kv[s] == [] for s in range(4))  # the sequences it used are empty again


def test_the_engine_measures_the_exact_paths_for_the_answer_memory_without_speculation() -> None:
    context = RoundsOtherwise(ContextShape(2048, 64, 4, 1), can_cut=True)
    context.rounds_past, context.rounds_beside = 256, 3
    engine = Engine(FakeModel(), context, 512, probes_paths=True)  # type: ignore[arg-type]
    engine.start()
    try:
        paths = engine.paths
        assert (paths.run, paths.until, paths.neighbours) == (None, 256, 2)  # None: no limit
        assert engine.runner.paths is paths  # what marks each sequence's steps
    finally:
        engine.close()


class GroupsRows(FakeContext):
    """As llama.cpp's repacked weights: a batch's rows in whole groups of `granule` from its
    first, the rows left over at its end otherwise."""

    granule: int = 1

    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int],
        wants_logits: Sequence[bool],
    ) -> None:
        super().decode(tokens, positions, seq_ids, wants_logits)
        grouped = len(tokens) - len(tokens) % self.granule
        for index, row in self._rows.items():
            if index >= grouped:
                row[0] += 1e-6


@pytest.mark.parametrize("granule", [1, 2, 4, 8, 16])
def test_the_probe_finds_how_many_rows_a_chunk_computes_in_groups(granule: int) -> None:
    context = GroupsRows(ContextShape(512, 128, 2, 1))
    context.granule = granule
    assert row_granule(context, seq_id=1) == granule
    assert context.kv[1] == []  # the sequence it used is empty again


def test_the_engine_measures_the_row_groups_where_it_keeps_prompts() -> None:
    context = GroupsRows(ContextShape(1024, 128, 2, 1))
    context.granule = 8
    engine = Engine(FakeModel(), context, 512, takes_snapshots=True)  # type: ignore[arg-type]
    engine.start()
    try:
        assert engine.scheduler.reuse.granule == 8
    finally:
        engine.close()
    small = GroupsRows(ContextShape(1024, 64, 2, 1))  # too small a batch to measure: no groups
    small.granule = 8
    assert row_granule(small) == 1
    short = GroupsRows(ContextShape(2 * 72, 128, 2, 1))  # a sequence of 72 cells: not tried
    short.granule = 8
    assert row_granule(short) == 1 and short.batches == []
