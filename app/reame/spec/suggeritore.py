"""Il Suggeritore: the form of what is being written, suggested as draft text. Pure, model-free.

It never suggests content, only structure the text so far has set up: the next number of a
numbered list, the marker of a bulleted one, the opening of a table's next row, the next key of
a JSON object whose earlier sibling in the same array had it. The model accepts or refuses the
suggestion in its verify batch like any other draft, so it never changes what is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

_NUMBERED = re.compile(r"^(\s*)(\d{1,6})([.)])( +)")
_BULLET = re.compile(r"^(\s*)([-*+•])( +)")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')
TAIL_CHARS = 2000  # how far back the structure is looked for


def suggest(text: str) -> str:
    """The structural text likely to come next after `text`, or "" when there is none."""
    text = text[-TAIL_CHARS:]
    if text.endswith("\n"):
        return _next_line_start(text)
    return _next_json_key(text)


def _next_line_start(text: str) -> str:
    lines = text[:-1].split("\n")
    last = lines[-1]
    if not last.strip():
        return ""
    if m := _NUMBERED.match(last):
        indent, number, mark, space = m.groups()
        return f"{indent}{int(number) + 1}{mark}{space}" + _shared_opening(lines, _NUMBERED)
    if m := _BULLET.match(last):
        return "".join(m.groups()) + _shared_opening(lines, _BULLET)
    if _TABLE_ROW.match(last):
        return last[: len(last) - len(last.lstrip())] + "|"
    return ""


def _shared_opening(lines: list[str], marker: re.Pattern[str]) -> str:
    """What the last two items of a list both open with after their marker, cut at a word's
    end (`**`, `The capital of `): a line template the list keeps repeating."""
    if len(lines) < 2:
        return ""
    items = []
    for line in lines[-2:]:
        m = marker.match(line)
        if m is None:
            return ""
        items.append(line[m.end() :])
    a, b = items
    if a == b:
        return ""  # the same item twice: content, not form
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    opening = a[:common]
    if opening and opening[-1].isalnum():  # it ends inside a word: keep whole words only
        opening = opening[: opening.rfind(" ") + 1]
    return opening


def _next_json_key(text: str) -> str:
    """After `{` or `,` (and spacing) inside an object of an array whose previous object is
    complete: that object's next key, with its spacing."""
    stripped = text.rstrip(" \t\n")
    if not stripped.endswith(("{", ",")):
        return ""
    opened = _open_object(stripped)
    if opened is None:
        return ""
    start, previous = opened
    keys_before = _KEY.findall(text[start:])
    siblings = _keys_of(previous)
    if not siblings or siblings[: len(keys_before)] != keys_before:
        return ""
    if len(keys_before) >= len(siblings):
        return ""
    return json.dumps(siblings[len(keys_before)]) + ": "


def _open_object(text: str) -> tuple[int, str] | None:
    """Where the innermost open JSON object starts, and the complete object just before it in
    the same array; None if there is no such pair. Strings are skipped when counting braces."""
    stack: list[int] = []
    closed: dict[int, str] = {}  # depth -> the last complete object's text at that depth
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(i)
            closed.pop(len(stack), None)
        elif ch in "}]" and stack:
            start = stack.pop()
            if ch == "}":
                closed[len(stack)] = text[start : i + 1]
    if not stack or text[stack[-1]] != "{" or len(stack) < 2 or text[stack[-2]] != "[":
        return None
    previous = closed.get(len(stack) - 1)
    return (stack[-1], previous) if previous is not None else None


def _keys_of(obj: str) -> list[str]:
    try:
        value = json.loads(obj)
    except ValueError:
        return []
    return list(value) if isinstance(value, dict) else []


class Suggeritore:
    """A sequence's drafter: suggestions tokenized by the model's own tokenizer, after the
    text the sequence has generated (decoded from its last tokens)."""

    name = "suggeritore"

    def __init__(
        self, piece: Callable[[int], bytes], tokenize: Callable[[str], list[int]], num_prompt: int
    ) -> None:
        self._piece, self._tokenize, self._num_prompt = piece, tokenize, num_prompt

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        start = max(self._num_prompt, len(history) - 400)
        text = b"".join(self._piece(t) for t in history[start:]).decode("utf-8", "replace")
        # NOTE: without its trailing space: both tokenizers here join a space to the word after
        hint = suggest(text).rstrip(" ")
        return self._tokenize(hint)[:k] if hint else []

    def observe(self, proposed: int, accepted: int) -> None:
        return None
