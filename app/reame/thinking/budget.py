"""How long a request may think: `reasoning_effort` and `reasoning_budget` against the server's
defaults and the request's max_tokens. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from reame.errors import InvalidRequestError

Effort = Literal["none", "minimal", "low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = ("none", "minimal", "low", "medium", "high")
DEFAULT_EFFORT_BUDGETS: dict[str, int] = {"minimal": 64, "low": 256, "medium": 1024, "high": 4096}
# NOTE: an effort's budget leaves at least this share of max_tokens to the answer
ANSWER_SHARE = 4


@dataclass(slots=True, frozen=True)
class ThinkingPlan:
    """What a request's thought may be: none at all, or at most `budget` tokens (None: any)."""

    thinks: bool
    budget: int | None


def thinking_plan(
    effort: str | None,
    budget: int | None,
    max_tokens: int,
    default_budget: int | None,
    effort_budgets: Mapping[str, int],
) -> ThinkingPlan:
    """An explicit budget wins over an effort level; a budget above max_tokens is refused; an
    effort's budget is clamped to leave room for an answer within max_tokens."""
    if budget is not None:
        if budget < 0:
            raise InvalidRequestError("reasoning_budget must be 0 or more", "reasoning_budget")
        if budget > max_tokens:
            raise InvalidRequestError(
                f"reasoning_budget {budget} is above max_tokens {max_tokens}: the answer would "
                "have no room; raise max_tokens or lower the budget",
                "reasoning_budget",
            )
        return ThinkingPlan(True, budget)
    if effort == "none":
        return ThinkingPlan(False, 0)
    if effort is not None:
        limit = effort_budgets.get(effort)
        if limit is None:
            raise InvalidRequestError(
                f"reasoning_effort {effort!r} is not one of {', '.join(EFFORTS)}",
                "reasoning_effort",
            )
        return ThinkingPlan(True, min(limit, max_tokens - max(1, max_tokens // ANSWER_SHARE)))
    return ThinkingPlan(True, default_budget)
