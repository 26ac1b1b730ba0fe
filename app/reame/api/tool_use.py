"""A chat's tools as this model's template takes them: the messages to render, the grammar the
answer must match, and the answer read back as OpenAI's message with `tool_calls`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reame.api.errors import ApiError
from reame.api.schemas import ChatRequest
from reame.errors import InvalidRequestError
from reame.grammar.matcher import Grammar, GrammarSpec
from reame.grammar.tool_calls import tool_grammar
from reame.llama.model import Model
from reame.tool_calls.choice import choice_mode
from reame.tool_calls.family import MARKERS, tool_family
from reame.tool_calls.parse import parse_tool_output
from reame.tool_calls.prompt import check_tool_conversation, tool_prompt
from reame.tool_calls.stream import Delta, ToolStream


def _special_ids(model: Model, family: str) -> dict[str, int]:
    """The family's markers that are one special token of this model's vocabulary."""
    out = {}
    for marker in MARKERS.get(family, ()):
        tokens = model.tokenize(marker, add_special=False)
        if len(tokens) == 1 and model.is_splitting_token(marker):
            out[marker] = tokens[0]
    return out


@dataclass(slots=True)
class ToolUse:
    family: str
    tools: list[dict[str, Any]]
    tool_choice: Any
    parallel: bool
    special: dict[str, int] = field(default_factory=dict)  # marker -> its token id

    @staticmethod
    def of(
        body: ChatRequest, messages: list[dict[str, Any]], model: Model, template: str | None
    ) -> ToolUse | None:
        """None for a chat without tools (a tool conversation is still checked: every result
        answers a call). `template`: the chat template in force, whose family it speaks."""
        tools = [t.model_dump(exclude_none=True) for t in body.tools or []]
        choice = body.tool_choice
        choice = (
            choice.model_dump() if choice is not None and not isinstance(choice, str) else choice
        )
        check_tool_conversation(messages, tools, choice)
        has_history = any(m.get("tool_calls") or m["role"] == "tool" for m in messages)
        if not tools and not has_history:
            return None
        if body.best_of is not None and body.best_of > 1:
            raise InvalidRequestError("best_of does not take tools", "best_of")
        family = tool_family(template)
        return ToolUse(family, tools, choice, body.parallel_tool_calls, _special_ids(model, family))

    @property
    def is_on(self) -> bool:
        """Calls may come: the answer is read for them."""
        return choice_mode(self.tool_choice, self.tools) != "none"

    def prompt(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list | None]:
        """The messages and the tools to render."""
        rendered = tool_prompt(messages, self.tools, self.tool_choice, self.family)
        return rendered.messages, rendered.tools

    def grammar(self) -> GrammarSpec | None:
        text = tool_grammar(self.tools, self.tool_choice, self.parallel, self.family, self.special)
        return GrammarSpec("lark", text, "tools") if text else None

    def compiled(self, grammar: Grammar | None, compile_: Callable[..., Grammar]) -> Grammar | None:
        """The grammar of the tool calls asked for, compiled by `compile_`
        (Service.grammar); they and a response_format exclude each other (one grammar a
        request)."""
        spec = self.grammar()
        if spec is None:
            return grammar
        if grammar is not None:
            raise ApiError(
                400,
                "response_format or grammar cannot be combined with tool calls; send "
                'tool_choice "none" to answer by the response_format',
                "response_format",
                "invalid_value",
            )
        return compile_(spec, kind="tools")

    def text_of(self, token: int, text: str) -> str:
        """A token's text as the reader needs it: a marker that is a control token too."""
        for marker, marker_id in self.special.items():
            if token == marker_id:
                return marker
        return text

    def message(self, text: str) -> tuple[dict[str, Any], bool]:
        """The assistant message of a whole answer, and whether it calls tools."""
        answer = parse_tool_output(text, self.family, self.tools) if self.is_on else None
        if answer is None or not answer.calls:
            content = answer.content if answer is not None else text
            return {"role": "assistant", "content": content or ""}, False
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in answer.calls
        ]
        return {"role": "assistant", "content": answer.content, "tool_calls": calls}, True

    def stream(self) -> ToolStream:
        return ToolStream(self.family, self.tools)


def delta_of(piece: Delta) -> dict[str, Any]:
    """An OpenAI chat delta for a piece of a tool stream."""
    return {"content": piece} if isinstance(piece, str) else {"tool_calls": [piece]}
