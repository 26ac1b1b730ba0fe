"""Past calls for templates whose models write each argument apart: Qwen3-Coder's XML, where
the template writes the arguments itself, and LFM2's Python calls, which its templates leave to
the assistant's text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reame.errors import InvalidRequestError
from reame.tool_calls.choice import function_of
from reame.tool_calls.pythonic import call_text

Message = dict[str, Any]
LFM2_OPEN, LFM2_CLOSE = "<|tool_call_start|>", "<|tool_call_end|>"


def xml_messages(messages: Sequence[Message]) -> list[Message]:
    """Each call's arguments as the template writes them (`|items`, then `|string` for what is
    neither object nor list): a number, true, false or null as its JSON text, since `|string`
    would write Python's True and None, which the model is not constrained to write back."""
    out = []
    for at, message in enumerate(messages):
        if message.get("tool_calls"):
            calls = [
                {**call, "function": {**call["function"], "arguments": _xml(call, at)}}
                for call in message["tool_calls"]
            ]
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def lfm2_messages(messages: Sequence[Message]) -> list[Message]:
    """An assistant's calls written into its text after what it said, as the model writes them:
    LFM2's templates render no tool_calls."""
    out = []
    for at, message in enumerate(messages):
        if message.get("tool_calls"):
            calls = ", ".join(
                call_text(call["function"]["name"], _arguments(call, at))
                for call in message["tool_calls"]
            )
            text = f"{message.get('content') or ''}{LFM2_OPEN}[{calls}]{LFM2_CLOSE}"
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            message["content"] = text
        out.append(message)
    return out


def lfm2_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The functions themselves, without OpenAI's {"type": "function"} wrapper: the list of
    tools Liquid's documentation puts in the system prompt."""
    return [function_of(t) for t in tools]


def _xml(call: Message, at: int) -> dict[str, Any]:
    return {
        k: v if isinstance(v, str | Mapping | list) else json.dumps(v)
        for k, v in _arguments(call, at).items()
    }


def _arguments(call: Message, at: int) -> Mapping[str, Any]:
    arguments = call["function"].get("arguments")
    if not isinstance(arguments, Mapping):
        raise InvalidRequestError(
            f"messages[{at}]: a tool call's arguments must be a JSON object for this model, "
            "whose template writes them one by one",
            param="messages",
        )
    return arguments
