"""Calls between markers, for the formats whose calls are not JSON objects (XML, Python), read
as their text arrives. Content is given out up to the opening marker (but for the end of it
that may still begin one); a subclass reads each call a step at a time, and a step that cannot
tell yet waits for more text, so that any split of the answer reads as the whole does."""

from __future__ import annotations

from collections.abc import Callable

from reame.tool_calls.events import Closed, Event, Failed, Opened, Text
from reame.tool_calls.scan import held_back

SPACE = " \t\r\n"
LONGEST_NAME = 256  # NOTE: of a function or an argument: past it the call is not one
WAIT = None  # a step's answer: more text may still decide
Step = Callable[[list[Event], bool], bool]


class MarkedScanner:
    OPENER = ""
    CLOSER = ""

    def __init__(self) -> None:
        self._buf = ""
        self._raw = ""  # the text of the call being read, for when it is not one after all
        self._named = False  # the call being read was given out by its name
        self._step: Step = self._content

    def feed(self, text: str) -> list[Event]:
        self._buf += text
        return self._run(final=False)

    def finish(self) -> list[Event]:
        return self._run(final=True)

    def _run(self, final: bool) -> list[Event]:
        events: list[Event] = []
        while self._buf and self._step(events, final):
            pass
        if final and (self._raw or self._named):
            self._fail(events)
        return events

    def _opened(self, events: list[Event], final: bool) -> bool:
        raise NotImplementedError

    def _content(self, events: list[Event], final: bool) -> bool:
        at = self._buf.find(self.OPENER)
        if at < 0:
            keep = 0 if final else held_back(self._buf, (self.OPENER,))
            if len(self._buf) > keep:
                events.append(Text(self._buf[: len(self._buf) - keep]))
                self._buf = self._buf[len(self._buf) - keep :]
            return False
        if at:
            events.append(Text(self._buf[:at]))
        self._buf, self._raw = self._buf[at:], ""
        self._take(len(self.OPENER))
        self._step = self._opened
        return True

    def _closing(self, events: list[Event], final: bool) -> bool:
        """After the calls: their closing marker, if it is there (a model may stop before)."""
        rest = self._buf.lstrip(SPACE)
        if not final and self.CLOSER.startswith(rest) and rest != self.CLOSER:
            return False
        if rest.startswith(self.CLOSER):
            self._take(len(self._buf) - len(rest) + len(self.CLOSER))
        self._raw, self._step = "", self._content
        return True

    def _take(self, count: int) -> str:
        taken, self._buf = self._buf[:count], self._buf[count:]
        self._raw += taken
        return taken

    def _skip_space(self) -> None:
        self._take(len(self._buf) - len(self._buf.lstrip(SPACE)))

    def _tag(self, prefix: str, final: bool) -> str | bool | None:
        """The name in `<prefix NAME>` after any whitespace, taken; WAIT; or False if the text
        is not that."""
        self._skip_space()
        if len(self._buf) < len(prefix) or not self._buf.startswith(prefix):
            return WAIT if not final and prefix.startswith(self._buf) else False
        end = self._buf.find(">", len(prefix))
        name = self._buf[len(prefix) : end if end >= 0 else None]
        broken = "<" in name or "\n" in name or len(name) > LONGEST_NAME
        if end < 0:
            return False if broken or final else WAIT
        if broken or not name:
            return False
        self._take(end + 1)
        return name

    def _open(self, name: str, events: list[Event]) -> None:
        events.append(Opened(name))
        self._named = True

    def _close(self, events: list[Event]) -> None:
        events.append(Closed())
        self._raw, self._named = "", False

    def _fail(self, events: list[Event]) -> bool:
        """The call read so far is content after all (Failed if its name was given out); what
        follows is read as content."""
        if self._raw:
            events.append(Failed(self._raw) if self._named else Text(self._raw))
        self._raw, self._named, self._step = "", False, self._content
        return True
