"""The messages (and tools) to render a tool conversation with, for a template's family.

A template that knows tools gets them as Hugging Face gives them; a template that does not
("generic") gets them as text, as llama.cpp does: the tools and the JSON answer format in the
system message, past calls and their results written out in that format.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reame.tool_calls.checks import check_tool_conversation
from reame.tool_calls.choice import choice_mode, chosen_name
from reame.tool_calls.prompt_calls import lfm2_messages, lfm2_tools, xml_messages

__all__ = ["ToolPrompt", "check_tool_conversation", "generic_instructions", "tool_prompt"]

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolPrompt:
    messages: list[Message]
    tools: list[dict[str, Any]] | None  # for ChatTemplate.render(..., tools=)


def tool_prompt(
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    tool_choice: Any,
    family: str,
) -> ToolPrompt:
    mode = choice_mode(tool_choice, tools)
    if family == "generic":
        return ToolPrompt(_generic_messages(messages, tools or [], tool_choice, mode), None)
    names = _names_by_call_id(messages)
    ids = _mistral_id if family == "mistral" else str
    adjusted = [_for_template(m, names, ids) for m in messages]
    given = list(tools or []) if mode != "none" else None
    if family == "qwen3_coder":
        adjusted = xml_messages(adjusted)
    elif family == "lfm2":
        adjusted, given = lfm2_messages(adjusted), given and lfm2_tools(given)
    return ToolPrompt(adjusted, given)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _for_template(message: Message, names: dict[str, str], ids: Any) -> Message:
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    out["content"] = message.get("content") or ""
    if message.get("tool_calls"):
        # NOTE: without "tool_calls" unless there are some: Llama's template tests the key
        out["tool_calls"] = [
            {"id": ids(call.get("id", "")), "type": "function", "function": _function(call)}
            for call in message["tool_calls"]
        ]
    if message.get("role") == "tool":
        call_id = str(message.get("tool_call_id", ""))
        out["tool_call_id"] = ids(call_id)
        out.setdefault("name", names.get(call_id, ""))
    return out


def _function(call: dict[str, Any]) -> dict[str, Any]:
    """The call's function with its arguments as an object: templates write them `| tojson`."""
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # else the client's text, as it sent it
            arguments = json.loads(arguments)
    return {"name": function.get("name", ""), "arguments": arguments}


def _mistral_id(call_id: str) -> str:
    """Mistral's template refuses any id but 9 letters and digits: one stands for each id."""
    if len(call_id) == 9 and call_id.isascii() and call_id.isalnum():
        return call_id
    return hashlib.sha256(call_id.encode()).hexdigest()[:9]


def _names_by_call_id(messages: Sequence[Message]) -> dict[str, str]:
    return {
        str(call.get("id", "")): str((call.get("function") or {}).get("name", ""))
        for m in messages
        for call in m.get("tool_calls") or ()
    }


def generic_instructions(tools: Sequence[dict[str, Any]], tool_choice: Any, mode: str) -> str:
    """What the generic family adds to the system message: the tools and the answer format."""
    if mode == "auto":
        ask = (
            "Respond in JSON format, either with `tool_calls` (a request to call tools) "
            "or with `response` (a reply to the user's request)."
        )
    elif mode == "named":
        name = chosen_name(tool_choice)
        ask = f"Respond in JSON format with `tool_calls`, a request to call `{name}`."
    else:
        ask = "Respond in JSON format with `tool_calls` (a request to call tools)."
    example = {"tool_calls": [{"name": "tool_name", "arguments": {"arg1": "some_value"}}]}
    text = (
        f"{ask}\n\nYou can call any of the following tools to satisfy the user's requests: "
        f"{json.dumps(list(tools), ensure_ascii=False, indent=2)}\n\n"
        f"Example tool call syntax:\n\n{compact(example)}"
    )
    if mode == "auto":
        text += f"\n\nExample response syntax:\n\n{compact({'response': 'Hello!'})}"
    return text


def _generic_messages(
    messages: Sequence[Message], tools: Sequence[dict[str, Any]], tool_choice: Any, mode: str
) -> list[Message]:
    names = _names_by_call_id(messages)
    out: list[Message] = []
    for message in messages:
        role, content = message.get("role"), message.get("content") or ""
        if role == "tool":
            result = {"tool_response": _tool_response(message, names)}
            # NOTE: as the user (every template has that role), one turn for a run of results
            if out and out[-1].get("tool_results"):
                out[-1]["content"] += "\n" + compact(result)
            else:
                out.append({"role": "user", "content": compact(result), "tool_results": True})
        elif role == "assistant" and message.get("tool_calls"):
            calls = [_function(call) for call in message["tool_calls"]]
            out.append({"role": "assistant", "content": compact({"tool_calls": calls})})
        elif role == "assistant" and mode != "none":
            out.append({"role": "assistant", "content": compact({"response": content})})
        else:
            out.append({**message, "content": content})
    for message in out:
        message.pop("tool_results", None)
    if mode == "none":
        return out
    instructions = generic_instructions(tools, tool_choice, mode)
    if out and out[0].get("role") == "system":
        out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{instructions}"}
    else:
        out.insert(0, {"role": "system", "content": instructions})
    return out


def _tool_response(message: Message, names: dict[str, str]) -> dict[str, Any]:
    call_id = str(message.get("tool_call_id", ""))
    name = message.get("name") or names.get(call_id, "")
    return {"tool": name, "content": message.get("content") or "", "tool_call_id": call_id}
