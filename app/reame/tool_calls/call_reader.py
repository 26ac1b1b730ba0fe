"""One call object, {"name": ..., "arguments": {...}}, read as its text arrives.

Only the object's outline is tracked (strings, nesting, its own keys): enough to know where it
ends, to learn the name as soon as its string closes, and to pass the arguments on as they come.
The JSON itself is judged by the json module once the object is whole.
"""

from __future__ import annotations

import json
from typing import Any

ARGUMENT_KEYS = ("arguments", "parameters")
_SPACE = " \t\r\n"


class CallReader:
    """Fed text from the call's opening brace on; `done` once its closing brace is read."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.done = False
        self.raw: list[str] = []
        self._arguments: list[str] = []  # without whitespace between tokens
        self._taken = 0
        self._arguments_key: str | None = None
        self._depth = 0
        self._in_string = self._escaped = False
        self._key: str | None = None  # the member whose value is being read; None: a key
        self._token: list[str] = []

    def feed(self, text: str) -> int:
        """Reads text up to the object's end; returns how much of it was the object's."""
        for at, ch in enumerate(text):
            self.raw.append(ch)
            if self._step(ch):
                self.done = True
                return at + 1
        return len(text)

    def take_arguments(self) -> str:
        """The arguments text read since the last take, without whitespace between tokens."""
        taken = "".join(self._arguments[self._taken :])
        self._taken = len(self._arguments)
        return taken

    def call(self) -> tuple[str, str] | None:
        """(name, arguments) if the whole object read is a well-formed call, else None."""
        try:
            value: Any = json.loads("".join(self.raw))
        except ValueError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return None
        if not isinstance(value.get(self._arguments_key or ""), dict):
            return None
        return value["name"], "".join(self._arguments)

    def _step(self, ch: str) -> bool:
        if self._in_string:
            self._keep(ch)
            if self._escaped:
                self._escaped = False
            elif ch == "\\":
                self._escaped = True
            elif ch == '"':
                self._in_string = False
                if self._depth == 1 and self._key == "name":
                    self.name = _string(self._token)
            return False
        if ch in _SPACE:
            return False
        if ch in "{[":
            self._depth += 1
        elif ch in "}]":
            self._depth -= 1
        elif ch == '"':
            self._in_string = True
        if self._depth == 0:
            return True
        if self._depth == 1 and ch in ":,{":
            self._member_edge(ch)
        else:
            self._keep(ch)
        return False

    def _member_edge(self, ch: str) -> None:
        if ch == ":" and self._key is None:
            self._key = _string(self._token) or ""
            if self._key in ARGUMENT_KEYS and self._arguments_key is None:
                self._arguments_key = self._key
        elif ch != ":":
            self._key = None
        self._token = []

    def _keep(self, ch: str) -> None:
        self._token.append(ch)
        if self._key is not None and self._key == self._arguments_key:
            self._arguments.append(ch)


def _string(token: list[str]) -> str | None:
    try:
        value = json.loads("".join(token))
    except ValueError:
        return None
    return value if isinstance(value, str) else None
