"""reasoning_effort and reasoning_budget against the server's defaults and max_tokens."""

from __future__ import annotations

import pytest

from reame.errors import InvalidRequestError
from reame.thinking.budget import DEFAULT_EFFORT_BUDGETS, ThinkingPlan, thinking_plan


def plan(effort=None, budget=None, max_tokens=512, default=None) -> ThinkingPlan:
    return thinking_plan(effort, budget, max_tokens, default, DEFAULT_EFFORT_BUDGETS)


def test_no_word_thinks_as_the_server_says() -> None:
    assert plan() == ThinkingPlan(True, None)
    assert plan(default=100) == ThinkingPlan(True, 100)


def test_none_does_not_think_and_the_levels_give_their_budgets() -> None:
    assert plan("none") == ThinkingPlan(False, 0)
    assert plan("low", max_tokens=4096) == ThinkingPlan(True, DEFAULT_EFFORT_BUDGETS["low"])


def test_an_effort_leaves_room_for_an_answer() -> None:
    assert plan("high", max_tokens=400) == ThinkingPlan(True, 300)


def test_an_explicit_budget_wins_and_is_refused_above_max_tokens() -> None:
    assert plan("none", budget=50) == ThinkingPlan(True, 50)
    assert plan(budget=512, max_tokens=512) == ThinkingPlan(True, 512)
    with pytest.raises(InvalidRequestError, match="above max_tokens"):
        plan(budget=513, max_tokens=512)
    with pytest.raises(InvalidRequestError, match="0 or more"):
        plan(budget=-1)
