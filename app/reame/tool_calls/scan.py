"""A model's answer read as content and tool calls while it is written, in one family's syntax.

Both the parser (the whole answer) and the stream (a piece at a time) read through here, so
they agree. Text is held back only while it may still open a call (a marker begun, not ended).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_core import from_json

from reame.tool_calls.call_reader import CallReader
from reame.tool_calls.events import Arguments, Closed, Event, Failed, Opened, Text


@dataclass(frozen=True, slots=True)
class _Framing:
    openers: tuple[str, ...] = ()  # markers before the call(s)
    object_openers: tuple[str, ...] = ()  # text that is the start of a call object itself
    closer: str = ""  # after the call(s)
    in_list: bool = False  # calls in a JSON array


_FRAMINGS = {
    "hermes": _Framing(openers=("<tool_call>",), closer="</tool_call>"),
    "mistral": _Framing(openers=("[TOOL_CALLS]",), in_list=True),
    "llama3": _Framing(openers=("<|python_tag|>",), object_openers=('{"name"', '{"type"')),
}
# NOTE: the generic answer is one JSON object, told apart by how it opens
_GENERIC_HEADS = {
    '{"tool_calls":[': _Framing(closer="}", in_list=True),
    '{"tool_call":': _Framing(closer="}"),
    '{"response":"': _Framing(closer="}"),
}
_SPACE = " \t\r\n"


class Scanner:
    def __init__(self, family: str) -> None:
        self._generic = family not in _FRAMINGS
        self._framing = _FRAMINGS.get(family, _Framing())
        self._state = "head" if self._generic else "content"
        self._buf = ""
        self._raw = ""  # the text of the call being read, for when it is not one after all
        self._reader: CallReader | None = None
        self._string = ""  # the generic response string, raw, from its opening quote
        self._escaped = False  # its last character read is a backslash escaping the next
        self._said = 0  # how much of the decoded response was given out

    def feed(self, text: str) -> list[Event]:
        self._buf += text
        return self._run(final=False)

    def finish(self) -> list[Event]:
        return self._run(final=True)

    def _run(self, final: bool) -> list[Event]:
        events: list[Event] = []
        while self._buf and getattr(self, "_" + self._state)(events, final):
            pass
        if final and self._reader is not None:
            events.append(self._fail())
        return events

    def _take(self, count: int) -> str:
        taken, self._buf = self._buf[:count], self._buf[count:]
        self._raw += taken
        return taken

    def _head(self, events: list[Event], final: bool) -> bool:
        for head, framing in _GENERIC_HEADS.items():
            end = _loose_match(self._buf, head)
            if end is None:
                continue
            if end < 0 and not final:
                return False
            if end > 0:
                self._take(end)
                self._framing = framing
                self._state = "response" if "response" in head else "object_start"
                self._string = '"'
                return True
        self._state = "content"
        return True

    def _content(self, events: list[Event], final: bool) -> bool:
        markers = self._framing.openers + self._framing.object_openers
        found = [(self._buf.find(m), m) for m in markers if m in self._buf]
        if found:
            at, marker = min(found)
            if at:
                events.append(Text(self._buf[:at]))
            self._buf, self._raw = self._buf[at:], ""
            if marker in self._framing.openers:
                self._take(len(marker))
                self._state = "list_start" if self._framing.in_list else "object_start"
            else:
                self._state = "object_start"
            return True
        held = 0 if final else held_back(self._buf, markers)
        if len(self._buf) > held:
            events.append(Text(self._buf[: len(self._buf) - held]))
            self._buf = self._buf[len(self._buf) - held :]
        return False

    def _list_start(self, events: list[Event], final: bool) -> bool:
        self._take(len(self._buf) - len(self._buf.lstrip(_SPACE)))
        if self._buf.startswith("["):
            self._take(1)
        if self._buf:
            self._state = "object_start"
        return bool(self._buf)

    def _object_start(self, events: list[Event], final: bool) -> bool:
        self._take(len(self._buf) - len(self._buf.lstrip(_SPACE)))
        if not self._buf:
            return False
        if self._buf[0] != "{":
            events.append(Text(self._raw))
            self._raw, self._state = "", "content"
            return True
        self._reader, self._state = CallReader(), "object"
        return True

    def _object(self, events: list[Event], final: bool) -> bool:
        reader = self._reader
        assert reader is not None
        known = reader.name is not None
        self._take(reader.feed(self._buf))
        if reader.name is not None and not known:
            events.append(Opened(reader.name))
        if reader.name is not None and (fragment := reader.take_arguments()):
            events.append(Arguments(fragment))
        if not reader.done:
            return False
        if reader.call() is None or reader.name is None:
            events.append(self._fail())
            self._state = "content"  # what followed the call is content too
            return True
        if fragment := reader.take_arguments():
            events.append(Arguments(fragment))
        events.append(Closed())
        self._reader, self._raw = None, ""
        self._state = "after_object"
        return True

    def _fail(self) -> Event:
        known = self._reader is not None and self._reader.name is not None
        raw, self._raw, self._reader = self._raw, "", None
        return Failed(raw) if known else Text(raw)

    def _after_object(self, events: list[Event], final: bool) -> bool:
        rest = self._buf.lstrip(_SPACE)
        if not rest and not final:
            return False
        if self._framing.in_list and rest[:1] in (",", "]"):
            self._take(len(self._buf) - len(rest) + 1)
            self._state = "object_start" if rest[0] == "," else "closing"
            return True
        self._state = "closing"
        return True

    def _closing(self, events: list[Event], final: bool) -> bool:
        end = _loose_match(self._buf, self._framing.closer) if self._framing.closer else None
        if end is not None and end < 0 and not final:
            return False
        if end is not None and end > 0:
            self._take(end)
        self._raw, self._state = "", "content"
        if self._generic:
            self._framing = _Framing()  # what follows the answer's JSON is plain text
        return True

    def _response(self, events: list[Event], final: bool) -> bool:
        end, self._escaped = _string_end(self._buf, self._escaped)
        self._string += self._take(end if end is not None else len(self._buf))
        text = from_json(self._string, allow_partial="trailing-strings")
        if len(text) > self._said:
            events.append(Text(text[self._said :]))
            self._said = len(text)
        if end is None:
            return False
        self._state = "closing"
        return True


def _loose_match(text: str, literal: str) -> int | None:
    """Where `literal` ends in `text` read without whitespace; -1 if text may still become it;
    None if it cannot."""
    at = 0
    for ch in literal:
        while at < len(text) and text[at] in _SPACE:
            at += 1
        if at == len(text):
            return -1
        if text[at] != ch:
            return None
        at += 1
    return at


def held_back(text: str, markers: tuple[str, ...]) -> int:
    """The length of the longest end of text that begins a marker."""
    return max(
        (n for m in markers for n in range(1, len(m)) if text.endswith(m[:n])),
        default=0,
    )


def _string_end(text: str, escaped: bool) -> tuple[int | None, bool]:
    """Where an open JSON string closes in `text` (just past its quote), and whether its last
    character read escapes the next."""
    for at, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            return at + 1, False
    return None, escaped
