"""Il Suggeritore's JSON structure, pure: in an array of objects, the object being written
follows its previous sibling's keys, punctuation and layout, so those are suggested up to the
next value (with a string's opening quote: its content is the model's), and past it only where
the value is a counter the siblings keep moving on by one. After a complete object, the
separator the array uses and the next object's opening.

The text may be a window that starts anywhere in an answer: objects complete in the window at
its top level count as siblings too, when there are at least two of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from reame.speculation.structure_lines import counted_next

_LEX = re.compile(
    r'(?P<str>"(?:[^"\\]|\\.)*(?P<close>"?))'
    r"|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|(?P<lit>true|false|null)"
    r"|(?P<punct>[{}\[\]:,])"
    r"|(?P<ws>\s+)"
    r"|(?P<other>.)",
    re.S,
)
_VALUES = ("str", "num", "lit", "nested")
_FENCE = re.compile(r"^```", re.M)


@dataclass(slots=True)
class _Frame:
    kind: str  # "{", "[" or "root" (the window's top level)
    start: int
    objects: list[tuple[int, int]] = field(default_factory=list)  # complete child objects


@dataclass(slots=True, frozen=True)
class _Element:
    """One piece of an object's text at its own level: a key, punctuation, spacing, or a value
    (a nested object or array is one value)."""

    kind: str  # key | punct | ws | str | num | lit | nested | open (an unterminated string)
    text: str

    @property
    def is_value(self) -> bool:
        return self.kind in _VALUES


def next_in_json(text: str) -> str:
    """The structure that comes next in a JSON array of objects being written; "" if none."""
    if "{" not in text:
        return ""
    if closed := _fence_close(text):
        return closed
    stack = _frames(text)
    top = stack[-1]
    if _has_siblings(top):
        after = _continue_array(text, top)
        if after:
            return after
    parent = stack[-2] if len(stack) >= 2 else top
    if top.kind == "{" and len(parent.objects) >= (2 if parent.kind == "root" else 1):
        separator = _next_separator(text, parent, top.start)
        return _continue_object(text, top.start, parent, separator)
    return ""


def _fence_close(text: str) -> str:
    """The closing fence, once the JSON value that a code fence was opened for is complete."""
    fences = [m.end() for m in _FENCE.finditer(text)]
    if len(fences) % 2 == 0 or not text.endswith(("}", "]")):
        return ""  # no fence open (an answer's fences pair up), or not right after a closer
    body = text.find("\n", fences[-1]) + 1
    depth = 0
    for m in _LEX.finditer(text, body or len(text)):
        ch = m.group("punct")
        if ch in ("{", "["):
            depth += 1
        elif ch in ("}", "]"):
            depth -= 1
            if depth < 0:
                return ""
    return "\n```" if body and depth == 0 else ""


def _has_siblings(frame: _Frame) -> bool:
    """Whether the objects in this frame set up a pattern for the next: one in an array, two
    as an object's values or at the window's top level."""
    return len(frame.objects) >= (1 if frame.kind == "[" else 2)


def _frames(text: str) -> list[_Frame]:
    """The containers open at the end of `text`, outermost first, each with its complete
    child objects; an unmatched closer (the window began inside it) is ignored."""
    stack = [_Frame("root", 0)]
    for m in _LEX.finditer(text):
        ch = m.group("punct")
        if ch in ("{", "["):
            stack.append(_Frame(ch, m.start()))
        elif ch in ("}", "]") and len(stack) > 1:
            closed = stack.pop()
            if ch == "}" and closed.kind == "{":
                stack[-1].objects.append((closed.start, m.end()))
    return stack


def _continue_array(text: str, frame: _Frame) -> str:
    """After the last complete object of an array (or of an object's values): the rest of the
    separator and the next object's opening, if what follows the object so far starts that
    separator."""
    written = text[frame.objects[-1][1] :]
    separator = _next_separator(text, frame)
    if not separator or not separator.startswith(written):
        return ""
    opening, _ = _emit(_sibling_elements(text, frame), 0, _counters(text, frame))
    return separator[len(written) :] + opening


def _next_separator(text: str, frame: _Frame, current: int = -1) -> str:
    """What comes between the last object so far (the one starting at `current`, if given) and
    the next: in an array, what came between the last two (after `[` with a comma, for the
    first two); where a key comes between them, the last two with their counters moved on
    (`"item3": ` after `"item1": `, `"item2": `); "" when unknown."""
    starts = [start for start, _ in frame.objects[1:]]
    ends = [end for _, end in frame.objects]
    if current >= 0:
        starts.append(current)
    else:
        ends.pop()
    separators = [text[end:start] for end, start in zip(ends, starts, strict=True)]
    if frame.kind == "{":  # the key before the first object counts: `{"item1": {`
        separators.insert(0, "," + text[frame.start + 1 : frame.objects[0][0]])
        return (counted_next(*separators[-2:]) or "") if len(separators) >= 2 else ""
    if separators:
        if frame.kind == "root" and separators[-1].strip(", \n\t"):
            return ""  # top-level objects with text between them: no array to go on with
        return separators[-1]
    return "," + text[frame.start + 1 : frame.objects[0][0]] if frame.kind == "[" else ""


def _continue_object(text: str, start: int, parent: _Frame, separator: str) -> str:
    """The rest of the object being written, as its sibling goes on from where it is; spacing
    may differ between the two (a sibling on one line, this one on several)."""
    sibling = _sibling_elements(text, parent)
    counters = _counters(text, parent)
    written = _elements(text[start:])
    rest, j = "", 0
    key = ""
    i = 0
    while i < len(written):
        c = written[i]
        is_last = i == len(written) - 1
        if j >= len(sibling):
            return ""
        s = sibling[j]
        if c.kind == "ws":
            if s.kind == "ws":
                if is_last and s.text.startswith(c.text):
                    rest = s.text[len(c.text) :]
                j += 1
            i += 1
            continue
        if s.kind == "ws":
            j += 1
            continue
        if c.is_value and s.is_value:
            if is_last and not _is_complete(c, s, counters.get(key)):
                return ""
        elif c.kind in ("open", "str") and s.kind == "key" and is_last:
            if not s.text.startswith(c.text):
                return ""
            rest = s.text[len(c.text) :]
        elif c.kind != s.kind or c.text != s.text:
            return ""
        if s.kind == "key":
            key = s.text
        i, j = i + 1, j + 1
    out, is_closed = _emit(sibling, j, counters)
    if is_closed and separator:  # the object closes: the array most likely goes on
        opening, _ = _emit(sibling, 0, counters)
        out += separator + opening
    return rest + out


def _is_complete(written: _Element, sibling: _Element, counter: str | None) -> bool:
    """Whether a value at the very end of the text is finished: a closed string, a literal, a
    counter's value, a number as long as the sibling's."""
    if written.kind == "num":
        if counter is not None:
            return written.text == counter
        return len(written.text) >= len(sibling.text)
    return written.kind in ("str", "lit", "nested")


def _emit(sibling: list[_Element], j: int, counters: dict[str, str]) -> tuple[str, bool]:
    """The sibling's structure from element `j` on, up to the first value that is content;
    and whether that reached the sibling's end."""
    out: list[str] = []
    key = ""
    for s in sibling[j:]:
        if s.kind == "key":
            key = s.text
        if not s.is_value:
            out.append(s.text)
        elif s.kind == "num" and key in counters:
            out.append(counters[key])
        else:
            out.append({"str": '"', "nested": s.text[0]}.get(s.kind, ""))
            return "".join(out), False
    return "".join(out), bool(sibling)


def _sibling_elements(text: str, parent: _Frame) -> list[_Element]:
    start, end = parent.objects[-1]
    return _elements(text[start:end])


def _counters(text: str, parent: _Frame) -> dict[str, str]:
    """Keys whose integer value went up by one from the second last sibling to the last: the
    value that comes next."""
    if len(parent.objects) < 2:
        return {}
    a, b = (_parse(text[s:e]) for s, e in parent.objects[-2:])
    out = {}
    for key, value in b.items():
        before = a.get(key)
        if type(value) is int and type(before) is int and value == before + 1:
            out[json.dumps(key)] = str(value + 1)
    return out


def _parse(obj: str) -> dict:
    try:
        value = json.loads(obj)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _elements(obj: str) -> list[_Element]:
    """An object's text (from its `{`, complete or not) as elements at its own level."""
    out: list[_Element] = []
    depth = 0
    nested_start = 0
    pending_key = -1  # index in `out` of a string that a `:` would make a key
    for m in _LEX.finditer(obj):
        kind = m.lastgroup or "other"
        piece = m.group()
        if kind == "punct" and piece in "{[":
            depth += 1
            if depth == 2:
                nested_start = m.start()
                continue
        elif kind == "punct" and piece in "}]":
            depth -= 1
            if depth == 1:
                out.append(_Element("nested", obj[nested_start : m.end()]))
                continue
        if depth >= 2:
            continue
        if kind == "str" and not m.group("close"):
            kind = "open"
        if kind == "punct" and piece == ":" and pending_key >= 0:
            out[pending_key] = _Element("key", out[pending_key].text)
        if kind != "ws":
            pending_key = len(out) if kind == "str" else -1
        out.append(_Element(kind, piece))
    return out
