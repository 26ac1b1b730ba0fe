"""A chat request's prompt as the model in force takes it: its thought asked for (switches,
budget, a thought opened before a grammar), its tokens, where its parts end, what warm-ahead
computes after it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reame.api.schemas import ChatRequest
from reame.engine.request import ThoughtSpec
from reame.history_ahead import answer_starts
from reame.service import Service
from reame.thinking.budget import thinking_plan
from reame.thinking.framing import frame, template_kwargs, with_thought_apart


@dataclass(slots=True, frozen=True)
class ChatTurn:
    prompt: list[int]
    marks: tuple[int, ...]
    closing: tuple[int, ...]  # warm-ahead's tokens after the answer; () for none
    thought: ThoughtSpec | None
    cuts: tuple[int, ...] = ()  # Job.cuts: where answers start, for the history ahead
    kwargs: Mapping[str, Any] | None = None  # the template's variables it was rendered with

    @property
    def computes_history_ahead(self) -> bool:
        return bool(self.cuts)


@dataclass(slots=True, frozen=True)
class ThinkingDefaults:
    budget: int | None = None  # the server's reasoning_budget
    effort_budgets: Mapping[str, int] | None = None


def template_messages(body: ChatRequest, service: Service) -> list[dict[str, Any]]:
    """The messages as the template takes them (a thought sent back in content, apart)."""
    syntax = service.chat.thinking
    return [with_thought_apart(m.as_template_input(), syntax) for m in body.messages]


def chat_turn(
    service: Service,
    body: ChatRequest,
    messages: list[dict[str, Any]],
    tools: list[dict] | None,
    max_tokens: int,
    answer_bound: bool,
    defaults: ThinkingDefaults,
    warms_ahead: bool,
) -> ChatTurn:
    """`answer_bound`: a grammar or tools apply to the answer, so any thought comes first."""
    syntax = service.chat.thinking
    plan = thinking_plan(
        body.reasoning_effort,
        body.reasoning_budget,
        max_tokens,
        defaults.budget,
        defaults.effort_budgets or {},
    )
    kwargs = template_kwargs(syntax, plan, body.reasoning_effort, body.chat_template_kwargs or {})
    thought = None
    if body.continue_final_message:  # NOTE: the answer has begun: no thought comes before it
        text = service.chat.continued_text(messages, tools, kwargs)
    else:
        text = service.chat.text(messages, tools, kwargs)
    if syntax is not None and not body.continue_final_message:
        framed = frame(syntax, text, plan, answer_bound)
        text, thought = framed.text, service.chat.thought_spec(framed.end, plan.budget)
    prompt = service.chat.tokenize(text)
    marks = service.chat.marks(messages, prompt, tools, kwargs)
    # NOTE: not after tool calls (the next prompt writes them otherwise than the model), nor
    # after a thought that the template drops from the history
    drops = thought is not None and syntax is not None and syntax.drops_history
    closing = service.chat.closing() if warms_ahead and not drops else ()
    cuts: tuple[int, ...] = ()
    continues = body.continue_final_message
    if drops and warms_ahead and not continues and service.chat.warms_ahead and service.cache:
        cuts = answer_starts(service, messages, prompt, tools, kwargs)
    return ChatTurn(prompt, marks, closing, thought, cuts, kwargs)
