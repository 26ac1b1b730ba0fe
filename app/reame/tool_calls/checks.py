"""A request's tools, tool_choice and tool messages checked before anything is rendered."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reame.errors import InvalidRequestError
from reame.tool_calls.choice import chosen_name, tool_names

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def check_tool_conversation(
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None,
    tool_choice: Any,
) -> None:
    """InvalidRequestError saying what is wrong, or nothing."""
    names = tool_names(tools)
    for tool, name in zip(tools or (), names, strict=True):
        if tool.get("type") != "function":
            raise InvalidRequestError("tools: only tools of type 'function' are supported", "tools")
        if not _NAME.fullmatch(name):
            raise InvalidRequestError(
                f"tools: the function name {name!r} must be 1 to 64 letters, digits, _ or -",
                param="tools",
            )
    if duplicates := sorted({n for n in names if names.count(n) > 1}):
        raise InvalidRequestError(f"tools: {duplicates[0]!r} is defined twice", param="tools")
    _check_choice(tool_choice, names)
    call_ids: set[str] = set()
    for at, message in enumerate(messages):
        call_ids |= {str(c.get("id")) for c in message.get("tool_calls") or ()}
        if message.get("role") == "tool" and str(message.get("tool_call_id")) not in call_ids:
            raise InvalidRequestError(
                f"messages[{at}]: tool_call_id {message.get('tool_call_id')!r} answers no "
                "earlier assistant tool call",
                param="messages",
            )


def _check_choice(tool_choice: Any, names: list[str]) -> None:
    if tool_choice is None or tool_choice in ("none", "auto"):
        return
    if tool_choice != "required" and not isinstance(tool_choice, dict):
        raise InvalidRequestError(
            "tool_choice: expected 'none', 'auto', 'required' or "
            '{"type": "function", "function": {"name": ...}}',
            param="tool_choice",
        )
    if not names:
        raise InvalidRequestError(
            "tool_choice: a tool is required but the request has no tools", param="tool_choice"
        )
    name = chosen_name(tool_choice)
    if name is not None and name not in names:
        raise InvalidRequestError(
            f"tool_choice: no tool is named {name!r} (tools: {', '.join(names)})",
            param="tool_choice",
        )
