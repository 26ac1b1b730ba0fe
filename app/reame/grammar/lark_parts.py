"""The pieces every family's tool grammar (llguidance's Lark) is built of."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reame.grammar.closed_objects import closed_objects

TEXT = "TEXT: /(.|\\n)*/"
# NOTE: a small model, once it may add a call, tends to add the same one until max_tokens: a
# turn holds at most this many parallel calls (OpenAI sets no number; agents rarely need more)
MAX_PARALLEL_CALLS = 4
MORE = f"{{0,{MAX_PARALLEL_CALLS - 1}}}"


def json_rule(schema: dict[str, Any], lenient: bool) -> str:
    """`%json` of a schema, written without free whitespace."""
    return "%json " + json.dumps(compact(schema, lenient), ensure_ascii=False)


def compact(schema: dict[str, Any], lenient: bool = False) -> dict[str, Any]:
    # NOTE: no free whitespace: a small model pads JSON with newlines to max_tokens otherwise;
    # lenient (unknown keywords ignored) unless the tool asks for strict, as OpenAI does
    options = {**schema.get("x-guidance", {}), "whitespace_flexible": False}
    if lenient:
        options["lenient"] = True
    return {**closed_objects(schema), "x-guidance": options}


def text(literal: str) -> str:
    return json.dumps(literal, ensure_ascii=False)


def mark(marker: str, marks: Mapping[str, int]) -> str:
    return f"<[{marks[marker]}]>" if marker in marks else text(marker)


def opening(marker: str, marks: Mapping[str, int]) -> tuple[str, list[str]]:
    """Free text then the marker, and the rules it needs. A special token ends TEXT by itself
    (TEXT cannot match it); a textual marker needs a lazy lexeme, else TEXT would swallow it."""
    if marker in marks:
        return f"TEXT {mark(marker, marks)}", []
    name = "open_" + "".join(c for c in marker if c.isalnum()).lower()
    return name, [f"{name}[lazy]: TEXT {text(marker)}"]


def in_order(items: Sequence[tuple[str, bool]], separator: str = "") -> str:
    """Items (an expression, and whether it must be there) in turn, with `separator` between
    those that are there; the ones that must be there come first. "" when there are none."""
    if not separator or not items or items[0][1]:
        return _each(items, separator, after_first=False).lstrip()
    # NOTE: all optional: whichever comes first goes without a separator before it
    options = [f"{x}{_each(items[at + 1 :], separator)}" for at, (x, _) in enumerate(items)]
    return "(" + " | ".join(options) + ")?"


def _each(items: Sequence[tuple[str, bool]], separator: str, after_first: bool = True) -> str:
    out = ""
    for at, (item, must) in enumerate(items):
        sep = f"{separator} " if separator and (after_first or at > 0) else ""
        out += f" ({sep}{item})" + ("" if must else "?")
    return out


def lark(start: str, rules: list[str]) -> str:
    lines = [start, *rules]
    if any("TEXT" in line for line in lines):
        lines.insert(1, TEXT)
    return "\n".join(lines) + "\n"
