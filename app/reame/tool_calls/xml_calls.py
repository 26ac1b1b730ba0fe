"""Qwen3-Coder's XML calls, read as they arrive:

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>
    </tool_call>

A value is raw text up to `</parameter>` (less the newline on each side the template writes):
typed as JSON by the function's schema (parameters.typed_value). The call is given out by its
name as soon as it is read, and its arguments a parameter at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reame.tool_calls.events import Arguments, Event
from reame.tool_calls.marked import WAIT, MarkedScanner
from reame.tool_calls.parameters import json_text, parameters_by_name, property_schema, typed_value

_VALUE_END = "</parameter>"
_ARGUMENT, _FUNCTION_END = "<parameter=", "</function>"


class XmlScanner(MarkedScanner):
    OPENER, CLOSER = "<tool_call>", "</tool_call>"

    def __init__(self, tools: Sequence[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self._parameters = parameters_by_name(tools)
        self._name = self._key = ""
        self._keys: list[str] = []

    def _opened(self, events: list[Event], final: bool) -> bool:
        name = self._tag("<function=", final)
        if name is WAIT:
            return False
        if not isinstance(name, str):
            return self._fail(events)
        self._name, self._keys = name, []
        self._open(name, events)
        self._step = self._argument
        return True

    def _argument(self, events: list[Event], final: bool) -> bool:
        self._skip_space()
        if self._buf.startswith(_FUNCTION_END):
            self._take(len(_FUNCTION_END))
            events.append(Arguments("}" if self._keys else "{}"))
            self._close(events)
            self._step = self._closing
            return True
        if not self._buf.startswith(_ARGUMENT[: len(self._buf)]):
            if not _FUNCTION_END.startswith(self._buf) or final:
                return self._fail(events)
            return False
        key = self._tag(_ARGUMENT, final)
        if key is WAIT:
            return False
        if not isinstance(key, str) or key in self._keys:
            return self._fail(events)
        self._key = key
        self._step = self._value_start
        return True

    def _value_start(self, events: list[Event], final: bool) -> bool:
        if self._buf.startswith("\n"):
            self._take(1)
        self._step = self._value
        return True

    def _value(self, events: list[Event], final: bool) -> bool:
        end = self._buf.find(_VALUE_END)
        if end < 0:
            return self._fail(events) if final else False
        raw = self._buf[:end]
        self._take(end + len(_VALUE_END))
        value = json_text(typed_value(raw.removesuffix("\n"), self._schema()))
        if value is None:
            return self._fail(events)
        opening = "," if self._keys else "{"
        self._keys.append(self._key)
        events.append(Arguments(f"{opening}{json_text(self._key)}:{value}"))
        self._step = self._argument
        return True

    def _schema(self) -> dict[str, Any] | None:
        parameters = self._parameters.get(self._name)
        properties = (parameters or {}).get("properties")
        if parameters is None or not isinstance(properties, dict) or self._key not in properties:
            return None
        return property_schema(parameters, properties[self._key])
