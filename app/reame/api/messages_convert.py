"""Anthropic's Messages API over the chat route: a Messages body as the chat body it means
(its system prompt, tool uses and results, thinking, sampling), and a chat answer as the
Message it is. Pure. (llama-server serves the Messages API the same way, through its
OpenAI-compatible chat: tools/server/server-task.cpp.)"""

from __future__ import annotations

import json
from typing import Any

from reame.api.errors import ApiError
from reame.api.messages_schemas import (
    CountTokensRequest,
    MediaBlock,
    MessagesRequest,
    RedactedThinkingBlock,
    ServerToolBlock,
    TextBlock,
    ThinkingBlock,
    ThinkingEnabled,
    ToolResultBlock,
    ToolUseBlock,
)

# NOTE: Anthropic's error types by status (its errors page); 503 is its "overloaded"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


# NOTE: output_config.effort's levels as the chat's reasoning_effort (it has no higher one)
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}


def error_body(error: ApiError) -> dict[str, object]:
    """An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}."""
    kind = _ERROR_TYPES.get(
        error.status, "api_error" if error.status >= 500 else "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def chat_body(body: MessagesRequest | CountTokensRequest, model: str) -> dict[str, Any]:
    """The chat request a Messages body means, as JSON (ChatRequest validates it)."""
    out: dict[str, Any] = {"model": model, "messages": _messages(body)}
    last = out["messages"][-1]
    if last["role"] == "assistant":
        # NOTE: a last assistant turn is the start of the answer (Anthropic's prefill)
        if last.get("tool_calls"):
            raise ApiError(
                400,
                "a last assistant turn with tool uses has nothing to continue: send the tool "
                "results in a user turn",
                f"messages.{len(body.messages) - 1}.content",
            )
        out["continue_final_message"] = True
    if body.tools:
        out["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    **({"description": t.description} if t.description else {}),
                    "parameters": t.input_schema,
                },
            }
            for t in body.tools
        ]
    if (choice := body.tool_choice) is not None:
        if choice.type == "tool":
            if choice.name is None:
                raise ApiError(400, "tool_choice of type tool names a tool", "tool_choice.name")
            out["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
        else:
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
        if choice.disable_parallel_tool_use:
            out["parallel_tool_calls"] = False
    if isinstance(body.thinking, ThinkingEnabled):
        out["reasoning_budget"] = body.thinking.budget_tokens
    elif body.thinking is not None and body.thinking.type == "disabled":
        out["reasoning_effort"] = "none"
    if (config := body.output_config) is not None:
        if config.format is not None:
            schema = {"name": "output", "schema": config.format.schema_}
            out["response_format"] = {"type": "json_schema", "json_schema": schema}
        if config.effort is not None and "reasoning_budget" not in out:
            out["reasoning_effort"] = _EFFORTS[config.effort]
    if isinstance(body, MessagesRequest):
        if body.max_tokens > 0:  # NOTE: 0 asks for no answer (the route warms the prompt)
            out["max_tokens"] = body.max_tokens
        for field in ("temperature", "top_p", "top_k"):
            if (value := getattr(body, field)) is not None:
                out[field] = value
        if body.stop_sequences:
            out["stop"] = body.stop_sequences
        if body.stream:
            out["stream"], out["stream_options"] = True, {"include_usage": True}
    return out


def _messages(body: MessagesRequest | CountTokensRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if body.system:
        system = body.system
        out.append(
            {"role": "system", "content": system if isinstance(system, str) else _joined(system)}
        )
    for i, message in enumerate(body.messages):
        where = f"messages.{i}.content"
        if isinstance(message.content, str):
            out.append({"role": message.role, "content": message.content})
        elif message.role == "user":
            out += _user_turn(message.content, where)
        else:
            out.append(_assistant_turn(message.content, where))
    return out


def _user_turn(blocks: list, where: str) -> list[dict[str, Any]]:
    """Tool results as tool messages (they answer the calls of the turn before), then the
    user's text as one message."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in blocks:
        if isinstance(block, ToolResultBlock):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_use_id,
                    "content": _result(block, where),
                }
            )
        elif isinstance(block, TextBlock | MediaBlock):
            texts.append(_text(block, where))
        elif not isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            raise _unsupported(block, where)
    if texts or not out:
        out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant_turn(blocks: list, where: str) -> dict[str, Any]:
    """Its text, its thought (a chat's reasoning_content) and its tool uses (tool_calls)."""
    texts, thoughts, calls = [], [], []
    for block in blocks:
        if isinstance(block, TextBlock | MediaBlock):
            texts.append(_text(block, where))
        elif isinstance(block, ThinkingBlock):
            thoughts.append(block.thinking)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False)
            calls.append(
                {
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": arguments},
                }
            )
        elif not isinstance(block, RedactedThinkingBlock):  # NOTE: only Anthropic reads those
            raise _unsupported(block, where)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    if calls:
        message["tool_calls"] = calls
    return message


def _result(block: ToolResultBlock, where: str) -> str:
    content = block.content
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(_text(b, where) for b in content)


def _text(block: TextBlock | MediaBlock, where: str) -> str:
    if isinstance(block, TextBlock):
        return block.text
    source = block.source if isinstance(block.source, dict) else {}
    if (
        block.type == "document"
        and source.get("type") == "text"
        and isinstance(source.get("data"), str)
    ):
        return source["data"]
    raise ApiError(
        400,
        f"{block.type} blocks are not supported: this server serves a text model (a document "
        'of plain text is taken: source {"type": "text", "data": ...})',
        where,
        "unsupported_content",
    )


def _joined(blocks: list[TextBlock]) -> str:
    return "".join(b.text for b in blocks)


def _unsupported(block: object, where: str) -> ApiError:
    kind = getattr(block, "type", type(block).__name__)
    why = (
        "Anthropic's server tools are not served here"
        if isinstance(block, ServerToolBlock)
        else "not taken here"
    )
    return ApiError(400, f"{kind} blocks are {why}", where, "unsupported_content")


def message(chat: dict[str, Any], rid: str, stop_sequence: str | None) -> dict[str, Any]:
    """A chat.completion's first choice as a Message."""
    choice = chat["choices"][0]
    said = choice["message"]
    content: list[dict[str, Any]] = []
    if said.get("reasoning_content"):
        content.append({"type": "thinking", "thinking": said["reasoning_content"], "signature": ""})
    if said.get("content"):
        content.append({"type": "text", "text": said["content"]})
    for call in said.get("tool_calls") or []:
        content.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": call["function"]["name"],
                "input": _input(call["function"]["arguments"]),
            }
        )
    return {
        "id": message_id(rid),
        "type": "message",
        "role": "assistant",
        "model": chat["model"],
        "content": content,
        "stop_reason": stop_reason(choice["finish_reason"], stop_sequence),
        "stop_sequence": stop_sequence,
        "usage": usage(chat["usage"]),
    }


def message_id(rid: str) -> str:
    return "msg_" + rid.partition("-")[2]


def stop_reason(finish_reason: str | None, stop_sequence: str | None) -> str:
    if finish_reason == "tool_calls":
        return "tool_use"
    if finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if stop_sequence is not None else "end_turn"


def usage(totals: dict[str, Any]) -> dict[str, int]:
    """Anthropic counts the prompt tokens read from its cache apart from the input tokens."""
    cached = int((totals.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {
        "input_tokens": int(totals["prompt_tokens"]) - cached,
        "output_tokens": int(totals["completion_tokens"]),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
