"""The tools of a request and its tool_choice, read once for the prompt, grammar and checks."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

EMPTY_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}


def function_of(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function") or {}


def tool_names(tools: Sequence[dict[str, Any]] | None) -> list[str]:
    return [str(function_of(t).get("name", "")) for t in tools or ()]


def parameters_of(tool: dict[str, Any]) -> dict[str, Any]:
    """The function's JSON schema for its arguments; a function without one takes none."""
    parameters = function_of(tool).get("parameters")
    return copy.deepcopy(parameters) if parameters else dict(EMPTY_PARAMETERS)


def chosen_name(tool_choice: Any) -> str | None:
    """The function a tool_choice names ({"type": "function", "function": {"name": ...}})."""
    if isinstance(tool_choice, dict):
        return str((tool_choice.get("function") or {}).get("name", ""))
    return None


def choice_mode(tool_choice: Any, tools: Sequence[dict[str, Any]] | None) -> str:
    """ "none", "auto", "required" or "named"; OpenAI's default is "auto" given tools."""
    if not tools or tool_choice == "none":
        return "none"
    if isinstance(tool_choice, dict):
        return "named"
    return "required" if tool_choice == "required" else "auto"
