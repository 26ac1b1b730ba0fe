"""LFM2's calls, read as they arrive: `<|tool_call_start|>[name(key=value, ...), ...]
<|tool_call_end|>`. A call is given out by its name at its `(`, its arguments whole at its `)`
(they are Python literals: read only once the call's text is complete)."""

from __future__ import annotations

from reame.tool_calls.events import Arguments, Event
from reame.tool_calls.marked import LONGEST_NAME, MarkedScanner
from reame.tool_calls.pythonic import NAME_CHARS, Outline, arguments_of


class PythonicScanner(MarkedScanner):
    OPENER, CLOSER = "<|tool_call_start|>", "<|tool_call_end|>"

    def __init__(self) -> None:
        super().__init__()
        self._outline = Outline()
        self._arguments: list[str] = []

    def _opened(self, events: list[Event], final: bool) -> bool:
        self._skip_space()
        if not self._buf:
            return self._fail(events) if final else False
        if not self._buf.startswith("["):
            return self._fail(events)
        self._take(1)
        self._step = self._name
        return True

    def _name(self, events: list[Event], final: bool) -> bool:
        self._skip_space()
        end = next((at for at, ch in enumerate(self._buf) if ch not in NAME_CHARS), None)
        if end is None:
            if final or len(self._buf) > LONGEST_NAME:
                return self._fail(events)
            return False
        if self._buf[end] != "(" or not 0 < end <= LONGEST_NAME:
            return self._fail(events)
        name = self._take(end)
        self._take(1)
        self._open(name, events)
        self._outline, self._arguments = Outline(), []
        self._step = self._call_arguments
        return True

    def _call_arguments(self, events: list[Event], final: bool) -> bool:
        outline = self._outline
        for at, ch in enumerate(self._buf):
            if ch == ")" and outline.at_top():
                self._arguments.append(self._take(at))
                self._take(1)
                arguments = arguments_of("".join(self._arguments))
                if arguments is None:
                    return self._fail(events)
                events.append(Arguments(arguments))
                self._close(events)
                self._step = self._after_call
                return True
            outline.step(ch)
        self._arguments.append(self._take(len(self._buf)))
        return False

    def _after_call(self, events: list[Event], final: bool) -> bool:
        self._skip_space()
        if not self._buf:
            return False
        if self._buf[0] == ",":
            self._take(1)
            self._step = self._name
        elif self._buf[0] == "]":
            self._take(1)
            self._raw, self._step = "", self._closing
        else:
            return self._fail(events)
        return True
