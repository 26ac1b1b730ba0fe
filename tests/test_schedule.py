from __future__ import annotations

import pytest

from reame.engine.step_plan import Slice, Work, plan_step


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


def test_a_narrow_prompt_chunk_wide_enough_is_computed_as_the_tiled_64_before_its_end() -> None:
    # an agent's turn: 56 new tokens after 1464 reused; 16 would stay narrow (cheaper so)
    turn = Work(1520, 1464, num_prompt=1520)
    assert plan_step([turn], budget=512, can_widen=True) == [Slice(0, 1456, 64, True)]
    assert plan_step([turn], budget=512) == [Slice(0, 1464, 56, True)]  # memory that cannot cut
    short = Work(1520, 1504, num_prompt=1520)
    assert plan_step([short], budget=512, can_widen=True) == [Slice(0, 1504, 16, True)]


def test_a_chunk_is_not_widened_past_its_start_nor_its_prompt_nor_the_budget() -> None:
    assert plan_step([Work(50, 0, num_prompt=50)], 512, can_widen=True) == [Slice(0, 0, 50, True)]
    # tokens past the prompt (an answer's, warmed ahead) are computed as they come
    assert plan_step([Work(650, 600, num_prompt=600)], 512, True) == [Slice(0, 600, 50, True)]
    # another prompt took all but 50 of the budget
    plan = plan_step([Work(462, 0, num_prompt=462), Work(650, 600, num_prompt=650)], 512, True)
    assert plan == [Slice(0, 0, 462, True), Slice(1, 600, 50, True)]
    # a chunk stopped by its snapshot point is widened too, and still ends there
    cut = Work(1000, 300, stop_at=350, num_prompt=1000)
    assert plan_step([cut], 512, True) == [Slice(0, 286, 64, False)]


def test_a_widened_chunk_with_forced_tokens_after_its_prompt_keeps_to_the_budget() -> None:
    # 50 prompt tokens then 10 a grammar forced: widened, the chunk is 74 wide
    forced = Work(660, 600, num_prompt=650)
    assert plan_step([forced], 74, True) == [Slice(0, 586, 74, True)]
    assert plan_step([forced], 73, True) == [Slice(0, 600, 60, True)]
