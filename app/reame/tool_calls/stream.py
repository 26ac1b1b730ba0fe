"""An answer read as it is generated, turned into OpenAI streaming deltas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reame.tool_calls.events import Arguments, Closed, Event, Opened, Text
from reame.tool_calls.parse import ToolCall, new_call_id
from reame.tool_calls.scanners import new_scanner

# NOTE: content text, or a `delta.tool_calls` item: {"index", "id", "type", "function":
# {"name", "arguments": ""}} when a call's name is known, {"index", "function": {"arguments"}}
# for each piece of its arguments after
Delta = str | dict[str, Any]


class ToolStream:
    """feed() each piece of generated text, then finish(). Content is given out as it comes,
    but for what may still open a call, and whitespace at its ends (as parse_tool_output strips
    it). A call is given out from its name on; if it then turns out malformed it stays given."""

    def __init__(self, family: str, tools: Sequence[dict[str, Any]] | None = None) -> None:
        self._scanner = new_scanner(family, tools)
        self.calls: list[ToolCall] = []  # the well-formed calls given out so far
        self._id, self._name, self._arguments = "", "", ""
        self._index = -1  # of the call being given out
        self._began = False  # some content was given out
        self._space = ""  # whitespace held back: the content may end there

    def feed(self, text: str) -> list[Delta]:
        return self._deltas(self._scanner.feed(text))

    def finish(self) -> list[Delta]:
        return self._deltas(self._scanner.finish())

    def _deltas(self, events: list[Event]) -> list[Delta]:
        deltas: list[Delta] = []
        for event in events:
            if isinstance(event, Text):
                self._content(event.text, deltas)
            elif isinstance(event, Opened):
                self._id, self._name, self._arguments = new_call_id(), event.name, ""
                self._index += 1
                function = {"name": event.name, "arguments": ""}
                deltas.append({"index": self._index, "id": self._id, "type": "function"})
                deltas[-1]["function"] = function
            elif isinstance(event, Arguments):
                self._arguments += event.fragment
                deltas.append({"index": self._index, "function": {"arguments": event.fragment}})
            elif isinstance(event, Closed):
                self.calls.append(ToolCall(self._id, self._name, self._arguments))
        return deltas

    def _content(self, text: str, deltas: list[Delta]) -> None:
        if not self._began:
            text = text.lstrip()
            self._began = bool(text)
        text = self._space + text
        body = text.rstrip()
        self._space = text[len(body) :]
        if not body:
            return
        if deltas and isinstance(deltas[-1], str):
            deltas[-1] += body
        else:
            deltas.append(body)
