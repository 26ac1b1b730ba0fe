"""A whole answer split into its content and its tool calls."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reame.tool_calls.events import Arguments, Closed, Event, Failed, Opened, Text
from reame.tool_calls.scanners import new_scanner


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text of an object, without whitespace between tokens


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    content: str | None
    calls: list[ToolCall] = field(default_factory=list)


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


def parse_tool_output(
    text: str, family: str, tools: Sequence[dict[str, Any]] | None = None
) -> ToolAnswer:
    """The content and calls of an answer in a family's syntax; a malformed call is content.
    `tools`: the request's (the XML family types its values by their schemas). Never raises."""
    scanner = new_scanner(family, tools)
    return answer_of(scanner.feed(text) + scanner.finish())


def answer_of(events: list[Event]) -> ToolAnswer:
    content: list[str] = []
    calls: list[ToolCall] = []
    name, arguments = "", []
    for event in events:
        if isinstance(event, Text):
            content.append(event.text)
        elif isinstance(event, Opened):
            name, arguments = event.name, []
        elif isinstance(event, Arguments):
            arguments.append(event.fragment)
        elif isinstance(event, Closed):
            calls.append(ToolCall(new_call_id(), name, "".join(arguments)))
        elif isinstance(event, Failed):
            content.append(event.raw)
    return ToolAnswer("".join(content).strip() or None, calls)
