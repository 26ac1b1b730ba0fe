from __future__ import annotations

import pytest

from reame.engine.schedule import Slice, Work, plan_step


def test_decoding_sequences_go_first_then_prompt_chunks_fill_the_budget() -> None:
    work = [Work(100, 0), Work(11, 10), Work(51, 50)]
    assert plan_step(work, budget=10) == [
        Slice(1, 10, 1, True),
        Slice(2, 50, 1, True),
        Slice(0, 0, 8, False),
    ]


def test_a_prompt_that_fits_asks_for_logits_at_its_end() -> None:
    assert plan_step([Work(5, 0)], budget=512) == [Slice(0, 0, 5, True)]


def test_the_oldest_prompt_gets_the_budget_first() -> None:
    plan = plan_step([Work(300, 0), Work(300, 0)], budget=512)
    assert plan == [Slice(0, 0, 300, True), Slice(1, 0, 212, False)]


def test_finished_work_is_not_scheduled() -> None:
    assert plan_step([Work(5, 5)], budget=4) == []


def test_more_decoders_than_budget_are_served_in_order() -> None:
    plan = plan_step([Work(3, 2)] * 5, budget=3)
    assert [s.index for s in plan] == [0, 1, 2]


def test_the_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        plan_step([Work(3, 0)], budget=0)
