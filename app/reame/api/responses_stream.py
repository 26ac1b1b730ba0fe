"""A streamed chat answer as the Responses API streams it: `response.created` and
`response.in_progress`, each output item (a thought, the text, each function call) as
`response.output_item.added`, its deltas (`response.reasoning_text.delta`,
`response.output_text.delta` inside a content part, `response.function_call_arguments.delta`)
and its `.done` events, then `response.completed` (or `response.incomplete`) with the whole
Response. Every event carries its sequence number. Pure: it reads the chat chunks Call.chunks
makes, and keeps what was said for the conversation stored after it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from reame.api import responses_convert as convert
from reame.api.chunk_reader import ChunkReader


class ResponseStream(ChunkReader):
    def __init__(self, response_id: str, describe: Callable[..., dict[str, Any]]) -> None:
        """`describe(output, totals, finish_reason)`: the Response object at that point."""
        super().__init__()
        self.response_id = response_id
        self._own = response_id.removeprefix("resp_")
        self._describe = describe
        self._sequence = 0
        self._items: list[dict[str, Any]] = []  # done ones, in order
        self._open: dict[str, Any] | None = None  # the item being written
        self._calls: dict[int, int] = {}  # a chat tool call's index -> the calls' number
        self.thought, self.text = "", ""
        self.tool_calls: list[dict[str, Any]] = []

    def start(self) -> str:
        response = self._describe([], None, None)
        return self._event("response.created", {"response": response}) + self._event(
            "response.in_progress", {"response": response}
        )

    def said(self) -> dict[str, Any]:
        """What the answer said, as the chat message the conversation keeps."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.thought:
            message["reasoning_content"] = self.thought
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message

    def finish(self) -> tuple[str, dict[str, Any] | None]:
        """The last events, and the whole Response (None: the answer failed)."""
        if self.is_failed:
            return "", None
        out = self._close()
        if not self._items:  # NOTE: nothing said: an empty message, as the unstreamed answer
            out += self._open_message()
            out += self._close()
        response = self._describe(self._items, self.totals, self.finish_reason or "stop")
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        out.append(self._event(kind, {"response": response}))
        return "".join(out), response

    def _delta(self, delta: dict[str, Any]) -> list[str]:
        out: list[str] = []
        if thought := delta.get("reasoning_content"):
            if self._kind() != "reasoning":
                out += self._close()
                out += self._add(convert.reasoning_item(f"rs_{self._own}", "", "in_progress"))
            self.thought += thought
            out.append(self._part_delta("response.reasoning_text.delta", thought))
        if text := delta.get("content"):
            if self._kind() != "message":
                out += self._close()
                out += self._open_message()
            self.text += text
            out.append(self._part_delta("response.output_text.delta", text, logprobs=[]))
        for call in delta.get("tool_calls") or []:
            function = call.get("function") or {}
            if call.get("index", 0) not in self._calls:
                out += self._close()
                number = self._calls[call.get("index", 0)] = len(self.tool_calls)
                self.tool_calls.append(
                    {
                        "id": call.get("id", ""),
                        "type": "function",
                        "function": {"name": function.get("name", ""), "arguments": ""},
                    }
                )
                head = self.tool_calls[number]
                item = convert.call_item(
                    f"fc_{self._own}_{number}",
                    head["id"],
                    head["function"]["name"],
                    "",
                    "in_progress",
                )
                out += self._add(item)
            if arguments := function.get("arguments"):
                self.tool_calls[-1]["function"]["arguments"] += arguments
                out.append(
                    self._event(
                        "response.function_call_arguments.delta",
                        {**self._where(), "delta": arguments},
                    )
                )
        return out

    def _open_message(self) -> list[str]:
        out = self._add(convert.message_item(f"msg_{self._own}", None, "in_progress"))
        part = {**self._where(), "content_index": 0, "part": convert.output_text("")}
        out.append(self._event("response.content_part.added", part))
        return out

    def _kind(self) -> str | None:
        return self._open["type"] if self._open is not None else None

    def _add(self, item: dict[str, Any]) -> list[str]:
        self._open = item
        return [self._event("response.output_item.added", {**self._index(), "item": item})]

    def _close(self) -> list[str]:
        item, self._open = self._open, None
        if item is None:
            return []
        where = {"item_id": item["id"], "output_index": len(self._items)}
        out = []
        if item["type"] == "reasoning":
            done = convert.reasoning_item(item["id"], self.thought)
            out.append(
                self._event(
                    "response.reasoning_text.done",
                    {**where, "content_index": 0, "text": self.thought},
                )
            )
        elif item["type"] == "message":
            done = convert.message_item(item["id"], self.text)
            part = convert.output_text(self.text)
            out.append(
                self._event(
                    "response.output_text.done",
                    {**where, "content_index": 0, "text": self.text, "logprobs": []},
                )
            )
            out.append(
                self._event(
                    "response.content_part.done", {**where, "content_index": 0, "part": part}
                )
            )
        else:
            call = self.tool_calls[-1]
            function = call["function"]
            name, arguments = function["name"], function["arguments"]
            done = convert.call_item(item["id"], call["id"], name, arguments)
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    {**where, "name": name, "arguments": arguments},
                )
            )
        out.append(self._event("response.output_item.done", {**self._index(), "item": done}))
        self._items.append(done)
        return out

    def _index(self) -> dict[str, int]:
        return {"output_index": len(self._items)}

    def _where(self) -> dict[str, Any]:
        assert self._open is not None
        return {"item_id": self._open["id"], "output_index": len(self._items)}

    def _part_delta(self, kind: str, delta: str, **extra: Any) -> str:
        return self._event(kind, {**self._where(), "content_index": 0, "delta": delta, **extra})

    def _error(self, error: dict[str, Any]) -> str:
        body = {
            "code": error.get("code") or error.get("type") or "server_error",
            "message": str(error.get("message", "the answer failed")),
            "param": error.get("param"),
        }
        response = self._describe(self._items, self.totals, None) | {
            "status": "failed",
            "error": {"code": body["code"], "message": body["message"]},
        }
        return self._event("error", body) + self._event("response.failed", {"response": response})

    def _event(self, kind: str, data: dict[str, Any]) -> str:
        payload = {"type": kind, "sequence_number": self._sequence, **data}
        self._sequence += 1
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        return f"event: {kind}\ndata: {text}\n\n"
