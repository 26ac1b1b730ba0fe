"""A rendered chat prompt made to think as a request asks: the template's switches set, a
closed empty thought added where a template has no switch, a thought opened where the answer
must follow one (a grammar applies after it). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reame.thinking.budget import ThinkingPlan
from reame.thinking.syntax import ThinkingSyntax


class PromptEnd(StrEnum):
    OPEN = "open"  # inside an open thought: the model thinks first
    CLOSED = "closed"  # after a closed thought: the model answers
    FREE = "free"  # the model may open a thought or answer


def template_kwargs(
    syntax: ThinkingSyntax | None, plan: ThinkingPlan, effort: str | None, asked: Mapping[str, Any]
) -> dict[str, Any]:
    """The template's variables: the request's chat_template_kwargs over the switches it reads
    (thinking on unless the plan says none, as llama.cpp renders)."""
    kwargs: dict[str, Any] = {}
    if syntax is not None and "enable_thinking" in syntax.switches:
        kwargs["enable_thinking"] = plan.thinks and plan.budget != 0
    if syntax is not None and "reasoning_effort" in syntax.switches and effort is not None:
        kwargs["reasoning_effort"] = effort
    return {**kwargs, **asked}


def prompt_end(syntax: ThinkingSyntax, text: str) -> PromptEnd:
    tail = text.rstrip()
    if tail.endswith(syntax.open):
        return PromptEnd.OPEN
    if tail.endswith(syntax.close):
        return PromptEnd.CLOSED
    return PromptEnd.FREE


@dataclass(slots=True, frozen=True)
class Framed:
    text: str
    end: PromptEnd


def frame(syntax: ThinkingSyntax, text: str, plan: ThinkingPlan, answer_bound: bool) -> Framed:
    """`text` as this request's prompt. `answer_bound`: a grammar or tools apply to the answer,
    so a thought, if any, must come first: it is opened here, not left to the model."""
    end = prompt_end(syntax, text)
    if (not plan.thinks or plan.budget == 0) and end is not PromptEnd.CLOSED:
        tail = syntax.close_run.lstrip() if end is PromptEnd.OPEN else syntax.empty_thought
        return Framed(text + tail, PromptEnd.CLOSED)
    if answer_bound and end is PromptEnd.FREE:
        return Framed(text + syntax.open_run, PromptEnd.OPEN)
    return Framed(text, end)


def with_thought_apart(message: dict[str, Any], syntax: ThinkingSyntax | None) -> dict[str, Any]:
    """An assistant message whose content carries its thought between the markers, with the
    thought as `reasoning_content` (as templates take it); others as they are."""
    content = message.get("content")
    if (
        syntax is None
        or message.get("role") != "assistant"
        or not isinstance(content, str)
        or syntax.close not in content
        or message.get("reasoning_content") is not None
    ):
        return message
    thought, _, answer = content.partition(syntax.close)
    thought = thought.split(syntax.open, 1)[-1]
    return {**message, "content": answer.lstrip(), "reasoning_content": thought.strip()}
