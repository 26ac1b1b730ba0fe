"""Calls written as Python: `name(key="value", n=3)`, as LFM2 writes them. Arguments are read
one by one as Python literals (ast.literal_eval, never eval) and given out as compact JSON."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from reame.tool_calls.parameters import json_text

NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_KEY = re.compile(r"[^\s=,()\[\]{}'\"]+")
_JSON_NAMES = {"true": True, "false": False, "null": None}


class Outline:
    """Where Python literal text stands: inside a string or not, how deep in brackets."""

    def __init__(self) -> None:
        self.quote = ""
        self.escaped = False
        self.depth = 0

    def at_top(self) -> bool:
        return not self.quote and self.depth == 0

    def step(self, ch: str) -> None:
        if self.quote:
            if self.escaped:
                self.escaped = False
            elif ch == "\\":
                self.escaped = True
            elif ch == self.quote:
                self.quote = ""
        elif ch in "'\"":
            self.quote = ch
        elif ch in "([{":
            self.depth += 1
        elif ch in ")]}":
            self.depth -= 1


def arguments_of(text: str) -> str | None:
    """The JSON object text of a call's `key=value, ...`; None if it is not that."""
    if not text.strip():
        return "{}"
    arguments: dict[str, Any] = {}
    for part in _top_level_parts(text):
        key, equals, literal = part.partition("=")
        key = key.strip()
        if not equals or not _KEY.fullmatch(key) or key in arguments:
            return None
        try:
            arguments[key] = _value(literal.strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return json_text(arguments)


def call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """A call as the model writes it."""
    return f"{name}(" + ", ".join(f"{k}={literal(v)}" for k, v in arguments.items()) + ")"


def literal(value: Any) -> str:
    """A JSON value as a Python literal (a JSON string is one already)."""
    if value is True or value is False or value is None:
        return repr(value)
    if isinstance(value, Mapping):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}: {literal(v)}" for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _top_level_parts(text: str) -> list[str]:
    outline, parts, start = Outline(), [], 0
    for at, ch in enumerate(text):
        if ch == "," and outline.at_top():
            parts.append(text[start:at])
            start = at + 1
        else:
            outline.step(ch)
    parts.append(text[start:])
    return parts


def _value(text: str) -> Any:
    # NOTE: JSON first: what is valid JSON means the same in Python but for escapes (\/, and
    # surrogate pairs that JSON joins); a model may also write JSON's true/false/null
    try:
        return json.loads(text)
    except ValueError:
        pass
    node = ast.parse(text, mode="eval").body
    return ast.literal_eval(_JsonNames().visit(node))


class _JsonNames(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _JSON_NAMES:
            return ast.Constant(_JSON_NAMES[node.id])
        return node
