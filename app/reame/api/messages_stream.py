"""A streamed chat answer as the Messages API streams it: `message_start`, each content block
(a thought, the text, each tool use) as `content_block_start`, its deltas (`thinking_delta`,
`text_delta`, `input_json_delta`) and `content_block_stop`, then `message_delta` with the stop
reason and the usage, and `message_stop`. Pure: it reads the chat chunks Call.chunks makes."""

from __future__ import annotations

import json
from typing import Any

from reame.api.chunk_reader import ChunkReader
from reame.api.errors import ApiError
from reame.api.messages_convert import error_body, message_id, stop_reason, usage


def event(kind: str, data: dict[str, Any]) -> str:
    """One server-sent event, named as its type (Anthropic's framing)."""
    payload = json.dumps({"type": kind, **data}, separators=(",", ":"), ensure_ascii=False)
    return f"event: {kind}\ndata: {payload}\n\n"


class MessageStream(ChunkReader):
    def __init__(self, rid: str, model: str, num_prompt_tokens: int) -> None:
        super().__init__()
        self.rid, self.model = rid, model
        self.num_prompt_tokens = num_prompt_tokens
        self._index = -1  # the open block's index (-1: none yet)
        self._open: str | None = None  # its type
        self._tool_blocks: dict[int, int] = {}  # a chat tool call's index -> its block's

    def start(self) -> str:
        message = {
            "id": message_id(self.rid),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self.num_prompt_tokens, "output_tokens": 0},
        }
        return event("message_start", {"message": message})

    def _error(self, error: dict[str, Any]) -> str:
        return event("error", error_body(_api_error(error)))

    def message(self) -> dict[str, Any]:
        """The whole message of an answer with nothing written (max_tokens 0)."""
        totals = self.totals or {"prompt_tokens": self.num_prompt_tokens, "completion_tokens": 0}
        return {
            "id": message_id(self.rid),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": "max_tokens",
            "stop_sequence": None,
            "usage": usage(totals),
        }

    def finish(self, stop_sequence: str | None) -> str:
        if self.is_failed:
            return ""
        out = self._close()
        delta = {
            "stop_reason": stop_reason(self.finish_reason, stop_sequence),
            "stop_sequence": stop_sequence,
        }
        totals = self.totals or {"prompt_tokens": self.num_prompt_tokens, "completion_tokens": 0}
        out.append(event("message_delta", {"delta": delta, "usage": usage(totals)}))
        out.append(event("message_stop", {}))
        return "".join(out)

    def _delta(self, delta: dict[str, Any]) -> list[str]:
        out: list[str] = []
        if thought := delta.get("reasoning_content"):
            out += self._block("thinking", {"thinking": "", "signature": ""})
            out.append(self._event_delta({"type": "thinking_delta", "thinking": thought}))
        if text := delta.get("content"):
            out += self._block("text", {"text": ""})
            out.append(self._event_delta({"type": "text_delta", "text": text}))
        for call in delta.get("tool_calls") or []:
            number = call.get("index", 0)
            function = call.get("function") or {}
            if number not in self._tool_blocks:
                head = {"id": call.get("id", ""), "name": function.get("name", ""), "input": {}}
                out += self._block("tool_use", head, force=True)
                self._tool_blocks[number] = self._index
            if arguments := function.get("arguments"):
                out.append(
                    self._event_delta({"type": "input_json_delta", "partial_json": arguments})
                )
        return out

    def _block(self, kind: str, head: dict[str, Any], force: bool = False) -> list[str]:
        """Open a block of `kind` unless one is open (a new tool use always opens one)."""
        if self._open == kind and not force:
            return []
        out = self._close()
        self._index += 1
        self._open = kind
        out.append(
            event(
                "content_block_start",
                {"index": self._index, "content_block": {"type": kind, **head}},
            )
        )
        return out

    def _close(self) -> list[str]:
        if self._open is None:
            return []
        out = []
        if self._open == "thinking":  # NOTE: a thought is signed; only Anthropic can sign one
            out.append(self._event_delta({"type": "signature_delta", "signature": ""}))
        out.append(event("content_block_stop", {"index": self._index}))
        self._open = None
        return out

    def _event_delta(self, delta: dict[str, Any]) -> str:
        return event("content_block_delta", {"index": self._index, "delta": delta})


def _api_error(error: dict[str, Any]) -> ApiError:
    status = {"server_error": 500, "rate_limit_error": 429}.get(error.get("type", ""), 400)
    if error.get("code") == "server_busy":
        status = 429
    return ApiError(status, str(error.get("message", "the answer failed")))
