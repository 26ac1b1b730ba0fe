"""Which steps compute a sequence as it computes alone (engine/exact_steps.py): model-free."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from reame.engine.exact_steps import ExactPaths, call_is_exact

PATHS = ExactPaths(run=4, until=256, neighbours=3)


@dataclass
class P:
    start: int
    width: int
    num_drafts: int = 0

    @property
    def tokens(self) -> tuple[int, ...]:
        return (7,) * self.width

    @property
    def end(self) -> int:
        return self.start + self.width

    @property
    def is_verify(self) -> bool:
        return self.num_drafts > 0


@pytest.mark.parametrize(
    ("parts", "exact"),
    [
        ([P(500, 1)], True),  # a lone decode, wherever it is
        ([P(0, 37)], True),  # a lone narrow prompt chunk (the exactness rule keeps it alike)
        ([P(10, 4, 3)], True),  # a verify run the probe found exact
        ([P(10, 5, 4)], False),  # longer than that
        ([P(254, 3, 2)], False),  # reaching past where runs round otherwise
        ([P(100, 1), P(200, 1)], True),  # two decodes side by side, before that position
        ([P(100, 1), P(200, 1), P(3, 1)], True),
        ([P(100, 1), P(200, 1), P(3, 1), P(4, 1)], False),  # more than the probe measured
        ([P(100, 1), P(256, 1)], False),  # one of them past that position
        ([P(0, 64), P(0, 64)], True),  # tiled prompt chunks side by side
        ([P(0, 40), P(0, 40)], False),  # narrow ones
        ([P(10, 2, 1), P(20, 2, 1)], False),  # verify runs side by side
    ],
)
def test_a_step_is_exact_only_where_the_probe_found_it_so(parts: list[P], exact: bool) -> None:
    assert call_is_exact(parts, PATHS) is exact


def test_unprobed_paths_take_nothing_but_a_lone_sequences_own_steps_as_exact() -> None:
    paths = ExactPaths()
    assert call_is_exact([P(3, 1)], paths) and call_is_exact([P(0, 20)], paths)
    assert not call_is_exact([P(3, 1), P(4, 1)], paths)
    assert not call_is_exact([P(3, 2, 1)], paths)


def test_a_q8_0_cache_has_no_position_past_which_neighbours_round_otherwise() -> None:
    paths = ExactPaths(run=8, until=None, neighbours=4)
    assert call_is_exact([P(3000, 1), P(4000, 1)], paths)
    assert call_is_exact([P(3000, 8, 7)], paths)


def test_where_every_run_probed_was_exact_longer_runs_are_taken_as_exact() -> None:
    """As speculation takes them (no cap on its drafts then): a run of 8 already takes the
    matmuls' tiled path; before, a lone 16-token verify run kept a greedy answer out."""
    paths = ExactPaths(run=None, until=256, neighbours=2)
    assert call_is_exact([P(38, 16, 15)], paths)
    assert not call_is_exact([P(250, 16, 15)], paths)  # still not past the position


def test_tiled_chunks_side_by_side_are_exact_where_the_rows_before_each_fill_whole_groups() -> None:
    """Repacked weights take a batch's rows in groups from its first: a chunk after one of 70
    rows (two left over by 4) would have its rows grouped otherwise than alone."""
    paths = ExactPaths(run=4, until=256, neighbours=3, granule=4)
    assert call_is_exact([P(0, 64), P(0, 70)], paths)  # the last one's rows left over as alone
    assert not call_is_exact([P(0, 70), P(0, 64)], paths)
    assert call_is_exact([P(0, 70), P(0, 64)], PATHS)  # no groups
