"""OpenAI's Responses API over the chat route: a Responses body (after the conversation its
`previous_response_id` names) as the chat body it means, and a chat answer as the Response it is,
with the conversation to store for the next call. Pure. (llama-server serves the Responses API
the same way, through its chat: tools/server/server-common.cpp, without keeping anything.)"""

from __future__ import annotations

from typing import Any

from reame.api.errors import ApiError
from reame.api.responses_schemas import (
    ContentMedia,
    ContentText,
    FormatJsonObject,
    FormatJsonSchema,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    ResponsesBuiltInTool,
    ResponsesRequest,
)

# NOTE: the chat's reasoning_effort has no level above high
_EFFORTS = {"xhigh": "high"}


def input_messages(body: ResponsesRequest) -> list[dict[str, Any]]:
    """The body's input as chat messages: a thought, an answer and the calls that follow it
    are one assistant message; a call's output is a tool message."""
    if isinstance(body.input, str):
        return [{"role": "user", "content": body.input}] if body.input else []
    out: list[dict[str, Any]] = []
    open_turn: dict[str, Any] | None = None  # an assistant message later items may join
    for i, item in enumerate(body.input):
        where = f"input.{i}"
        if isinstance(item, MessageItem):
            text = _text(item.content, f"{where}.content")
            if item.role == "assistant":
                after_thought = open_turn is not None and "tool_calls" not in open_turn
                if after_thought and not open_turn["content"]:  # type: ignore[index]
                    open_turn["content"] = text  # type: ignore[index]
                else:
                    open_turn = {"role": "assistant", "content": text}
                    out.append(open_turn)
                continue
            out.append({"role": item.role, "content": text})
        elif isinstance(item, FunctionCallItem):
            if open_turn is None:
                open_turn = {"role": "assistant", "content": ""}
                out.append(open_turn)
            call = {"name": item.name, "arguments": item.arguments}
            open_turn.setdefault("tool_calls", []).append(
                {"id": item.call_id, "type": "function", "function": call}
            )
            continue
        elif isinstance(item, FunctionCallOutputItem):
            content = _text(item.output, f"{where}.output")
            out.append({"role": "tool", "tool_call_id": item.call_id, "content": content})
        elif isinstance(item, ReasoningItem):
            thought = "".join(t.text for t in (item.content or item.summary))
            open_turn = {"role": "assistant", "content": "", "reasoning_content": thought}
            out.append(open_turn)
            continue
        else:
            raise ApiError(
                400, f"{item.type} items are not served here", where, "unsupported_content"
            )
        open_turn = None
    return out


def chat_body(
    body: ResponsesRequest, conversation: list[dict[str, Any]], new: list[dict[str, Any]]
) -> dict[str, Any]:
    """The chat request a Responses body means, as JSON (ChatRequest validates it): its
    instructions, the stored conversation, then its input."""
    for field in ("conversation", "prompt"):
        if getattr(body, field) is not None:
            raise ApiError(
                400,
                f"{field} is not served here: chain calls with previous_response_id",
                field,
                "unsupported_parameter",
            )
    messages = [{"role": "system", "content": body.instructions}] if body.instructions else []
    messages += conversation + new
    if not messages:
        raise ApiError(400, "input is empty and no earlier response is named", "input")
    out: dict[str, Any] = {"model": body.model, "messages": messages}
    if body.tools:
        out["tools"] = [_tool(t, i) for i, t in enumerate(body.tools)]
    if isinstance(body.tool_choice, str):
        out["tool_choice"] = body.tool_choice
    elif body.tool_choice is not None:
        out["tool_choice"] = {"type": "function", "function": {"name": body.tool_choice.name}}
    if body.parallel_tool_calls is not None:
        out["parallel_tool_calls"] = body.parallel_tool_calls
    form = body.text.format if body.text is not None else None
    if isinstance(form, FormatJsonSchema):
        schema = {"name": form.name, "schema": form.schema_}
        if form.strict is not None:
            schema["strict"] = form.strict
        out["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(form, FormatJsonObject):
        out["response_format"] = {"type": "json_object"}
    if body.reasoning is not None and body.reasoning.effort is not None:
        out["reasoning_effort"] = _EFFORTS.get(body.reasoning.effort, body.reasoning.effort)
    if body.max_output_tokens is not None:
        out["max_tokens"] = body.max_output_tokens
    for field in ("temperature", "top_p", "top_k", "seed"):
        if (value := getattr(body, field)) is not None:
            out[field] = value
    if body.stream:
        out["stream"], out["stream_options"] = True, {"include_usage": True}
    return out


def _tool(tool: object, i: int) -> dict[str, Any]:
    if isinstance(tool, ResponsesBuiltInTool):
        raise ApiError(
            400,
            f"{tool.type} tools are not served here: only function tools",
            f"tools.{i}.type",
            "unsupported_parameter",
        )
    function: dict[str, Any] = {"name": tool.name}  # type: ignore[attr-defined]
    if tool.description:  # type: ignore[attr-defined]
        function["description"] = tool.description  # type: ignore[attr-defined]
    if tool.parameters is not None:  # type: ignore[attr-defined]
        function["parameters"] = tool.parameters  # type: ignore[attr-defined]
    return {"type": "function", "function": function}


def _text(content: str | list, where: str) -> str:
    if isinstance(content, str):
        return content
    out = []
    for j, part in enumerate(content):
        if isinstance(part, ContentMedia):
            raise ApiError(
                400,
                f"{part.type} parts are not supported: this server serves a text model",
                f"{where}.{j}",
                "unsupported_content",
            )
        assert isinstance(part, ContentText)
        out.append(part.text if part.type != "refusal" else part.refusal or "")
    return "".join(t or "" for t in out)


def output_items(said: dict[str, Any], response_id: str) -> list[dict[str, Any]]:
    """A chat answer's message as output items: its thought, its text, its calls."""
    own = response_id.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    if said.get("reasoning_content"):
        items.append(reasoning_item(f"rs_{own}", said["reasoning_content"]))
    if said.get("content") or not said.get("tool_calls"):
        items.append(message_item(f"msg_{own}", said.get("content") or ""))
    for i, call in enumerate(said.get("tool_calls") or []):
        function = call["function"]
        items.append(
            call_item(f"fc_{own}_{i}", call["id"], function["name"], function["arguments"])
        )
    return items


def reasoning_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if text else []
    return {"type": "reasoning", "id": item_id, "summary": [], "content": content, "status": status}


def message_item(item_id: str, text: str | None, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [] if text is None else [output_text(text)],
    }


def output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def usage(totals: dict[str, Any] | None) -> dict[str, Any] | None:
    if totals is None:
        return None
    cached = int((totals.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    thought = int((totals.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return {
        "input_tokens": int(totals["prompt_tokens"]),
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": int(totals["completion_tokens"]),
        "output_tokens_details": {"reasoning_tokens": thought},
        "total_tokens": int(totals["prompt_tokens"]) + int(totals["completion_tokens"]),
    }


def response(
    body: ResponsesRequest,
    response_id: str,
    created_at: int,
    model: str,
    output: list[dict[str, Any]],
    totals: dict[str, Any] | None,
    finish_reason: str | None,
) -> dict[str, Any]:
    """The Response object (`finish_reason` None: still being written)."""
    status = "in_progress"
    if finish_reason is not None:
        status = "incomplete" if finish_reason == "length" else "completed"
    form = body.text.format if body.text is not None else None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": None,
        "incomplete_details": ({"reason": "max_output_tokens"} if status == "incomplete" else None),
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "model": model,
        "output": output,
        "parallel_tool_calls": body.parallel_tool_calls is not False,
        "previous_response_id": body.previous_response_id,
        "reasoning": {
            "effort": body.reasoning.effort if body.reasoning else None,
            "summary": None,
        },
        "store": body.store is not False,
        "temperature": body.temperature,
        "text": {"format": form.model_dump(by_alias=True) if form else {"type": "text"}},
        "tool_choice": (
            body.tool_choice.model_dump()
            if body.tool_choice is not None and not isinstance(body.tool_choice, str)
            else body.tool_choice or "auto"
        ),
        "tools": [t.model_dump(exclude_none=True) for t in body.tools or []],
        "top_p": body.top_p,
        "truncation": "disabled",
        "usage": usage(totals),
        "user": body.user,
        "metadata": body.metadata or {},
    }
