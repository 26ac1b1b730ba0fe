"""Il Suggeritore's line structures, pure: the opening of the next line of a list, a table or
any line template the text keeps repeating, with its counters moved on; a table's separator row
and the end of a table row.

A template is what two lines of the same form share from their start: the same characters, and
numbers that went up by one from the first to the second (a counter, written one further). It
stops where the two lines part (their content), cut back to a word's end.
"""

from __future__ import annotations

import re

_NUMBERED = re.compile(r"^(\s*)(\d{1,6})([.)])( +)")
_BULLET = re.compile(r"^(\s*)([-*+•])( +)")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
# a line that opens with markup (a list marker, a heading, a quote, a table cell, JSON) is form
_STRUCTURAL_START = re.compile(r"^\s*(?:\d{1,6}[.)] |[-*+•>] |#{1,6} |\||[{\[\"])")
_SEPARATOR_START = re.compile(r"^(\s*)\|(\s*:?-{3,}:?\s*)\|")
_DIGITS = re.compile(r"\d+")
REPEATED_LINES = 8  # whole lines suggested at once when all of a line is template


def next_in_line(text: str) -> str:
    """The rest of the current line's opening (and, after a complete table row or separator,
    the next line's), as the lines before it set it up; "" when nothing is set up."""
    head, newline, partial = text.rpartition("\n")
    if not newline:
        return ""
    lines = head.split("\n")
    if _is_table_row(lines[-1]) and (rest := _table_continuation(lines, partial)):
        return rest
    opening = _next_line(lines)
    if len(opening) > len(partial) and opening.startswith(partial):
        return opening[len(partial) :]
    return ""


def _next_line(lines: list[str]) -> str:
    last = lines[-1]
    if not last.strip():
        return _after_blank_line(lines)
    if len(lines) >= 2 and lines[-2].strip():
        template = _template(lines[-2], last)
        if template is not None:
            return template
    return _marker_of(last)


def _after_blank_line(lines: list[str]) -> str:
    """After a paragraph break: the next block's first line, when the last two blocks opened
    with a template (list items or numbered headings with a blank line between them)."""
    if len(lines) < 2 or not lines[-2].strip():
        return ""  # more than one blank line
    starts = [
        i
        for i, line in enumerate(lines[:-1])
        if line.strip() and (i == 0 or not lines[i - 1].strip())
    ]
    if len(starts) < 2 or (starts[-1] >= 2 and not lines[starts[-1] - 2].strip()):
        return ""  # one block, or two blank lines before the last: no rhythm to follow
    return _template(lines[starts[-2]], lines[starts[-1]], whole_lines=1) or ""


def _marker_of(line: str) -> str:
    """A lone list line's marker for the next item, a table row's opening."""
    if m := _NUMBERED.match(line):
        indent, number, mark, space = m.groups()
        return f"{indent}{int(number) + 1}{mark}{space}"
    if m := _BULLET.match(line):
        return "".join(m.groups())
    if _TABLE_ROW.match(line):
        return line[: len(line) - len(line.lstrip())] + "|"
    return ""


def _template(a: str, b: str, whole_lines: int = REPEATED_LINES) -> str | None:
    """The next line after `a` then `b`, as far as the two share a form; None when they do
    not. When all of `b` is template with a counter, the next `whole_lines` lines whole."""
    parts, i, j = _shared_form(a, b)
    has_counter = any(isinstance(p, int) for p in parts)
    if i == len(a) and j == len(b):
        if not has_counter:
            return None  # the same line twice: content, not form
        return "".join(_render(parts, step) + "\n" for step in range(1, whole_lines + 1))
    opening = _render(parts, 1)
    parted_in_word = (i < len(a) and a[i].isalnum()) or (j < len(b) and b[j].isalnum())
    if opening and opening[-1].isalnum() and parted_in_word:
        word_start = max((k + 1 for k, c in enumerate(opening) if not c.isalnum()), default=0)
        opening = opening[:word_start]
    if not opening.strip() or not (has_counter or _STRUCTURAL_START.match(b)):
        return None
    return opening


def counted_next(a: str, b: str) -> str | None:
    """When `b` is `a` with counters moved on by one (and nothing else changed), the one after
    `b`: `"item2": ` after `"item1": `, `"item2": ` gives `"item3": `. Else None."""
    parts, i, j = _shared_form(a, b)
    if i == len(a) and j == len(b) and any(isinstance(p, int) for p in parts):
        return _render(parts, 1)
    return None


def _shared_form(a: str, b: str) -> tuple[list[str | int], int, int]:
    """What `a` and `b` share from their start: characters, and numbers that are equal or went
    up by one (a counter: its value in `b`); and where in each the two part."""
    parts: list[str | int] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i].isdigit() and b[j].isdigit():
            da, db = _DIGITS.match(a, i), _DIGITS.match(b, j)
            assert da is not None and db is not None
            if int(db.group()) == int(da.group()) + 1:
                parts.append(int(db.group()))
            elif da.group() == db.group():
                parts.append(db.group())
            else:
                break
            i, j = da.end(), db.end()
            continue
        if a[i] != b[j]:
            break
        parts.append(b[j])
        i, j = i + 1, j + 1
    return parts, i, j


def _render(parts: list[str | int], step: int) -> str:
    return "".join(str(p + step) if isinstance(p, int) else p for p in parts)


def _is_table_row(line: str) -> bool:
    return bool(_TABLE_ROW.match(line))


def _table_continuation(lines: list[str], partial: str) -> str:
    """Inside a table: the rest of a separator row under its header; after a row with as many
    cells as the row above, the next line's opening."""
    above = lines[-1]
    if (len(lines) < 2 or not _is_table_row(lines[-2])) and (m := _SEPARATOR_START.match(partial)):
        indent, first_cell = m.groups()
        header_cells = above.strip().strip("|").split("|")
        if len(first_cell) == len(header_cells[0]):  # padded to the header's widths
            pad_left = first_cell[: len(first_cell) - len(first_cell.lstrip())]
            pad_right = first_cell[len(first_cell.rstrip()) :]
            cells = [
                pad_left + "-" * (len(c) - len(pad_left) - len(pad_right)) + pad_right
                for c in header_cells
            ]
        else:
            cells = [first_cell] * len(header_cells)
        row = indent + "|" + "|".join(cells) + "|"
        if row.startswith(partial) and len(row) >= len(partial):
            return row[len(partial) :] + "\n" + _next_line([*lines, row])
        return ""
    if (
        partial.rstrip().endswith("|")
        and partial.count("|") == above.count("|")
        and _is_table_row(partial)
    ):
        return "\n" + _next_line([*lines, partial.rstrip()])
    return ""
