"""The grammar of LFM2's Python calls (tool_calls/pythonic_calls.py reads them back):
`<|tool_call_start|>[name(key=value, ...), ...]<|tool_call_end|>`.

The arguments the schema requires come first, in the order of its `properties`, then any of the
optional ones, in that order too. A value is a Python literal of its property's type: a string
as a JSON string (which Python reads alike), a number as JSON, True/False, None; a list or an
object as JSON (the reader takes JSON's true/false/null inside one too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reame.grammar.lark_parts import MORE, in_order, json_rule, lark, mark, opening, text
from reame.tool_calls.choice import function_of, parameters_of
from reame.tool_calls.parameters import ordered_properties, types_of

OPEN, CLOSE = "<|tool_call_start|>", "<|tool_call_end|>"
_PYTHON = {"boolean": '"True" | "False"', "null": '"None"'}


def pythonic_grammar(
    tools: Sequence[dict[str, Any]], free: bool, many: bool, marks: Mapping[str, int]
) -> str:
    more = f' (", " call){MORE}' if many else ""
    rules = [f'calls: "[" call{more} "]" {mark(CLOSE, marks)}']
    rules.append("call: " + " | ".join(f"fn_{i}" for i in range(len(tools))))
    for i, tool in enumerate(tools):
        rules += _function(i, tool)
    if not free:
        return lark(f"start: {mark(OPEN, marks)} calls", rules)
    opened, lazy = opening(OPEN, marks)
    return lark(f"start: TEXT | {opened} calls", rules + lazy)


def _function(i: int, tool: dict[str, Any]) -> list[str]:
    function = function_of(tool)
    lenient = function.get("strict") is not True
    rules, items = [], []
    for j, (key, schema, required) in enumerate(ordered_properties(parameters_of(tool))):
        rules.append(f"arg_{i}_{j}: {text(key + '=')} {_value(schema, lenient)}")
        items.append((f"arg_{i}_{j}", required))
    opened = text(f"{function.get('name', '')}(")
    return [f'fn_{i}: {opened} {in_order(items, text(", "))} ")"', *rules]


def _value(schema: dict[str, Any], lenient: bool) -> str:
    types = types_of(schema)
    python = [_PYTHON[t] for t in types if t in _PYTHON]
    if not python:
        return json_rule(schema, lenient)
    others = [t for t in types if t not in _PYTHON]
    if others:
        kind = others[0] if len(others) == 1 else others
        python.insert(0, json_rule({**schema, "type": kind}, lenient))
    return "(" + " | ".join(python) + ")"
