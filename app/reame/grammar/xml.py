"""The grammar of Qwen3-Coder's XML calls (tool_calls/xml_calls.py reads them back).

A call is `<tool_call>\n<function=NAME>\n`, then for each argument `<parameter=KEY>\n` VALUE
`\n</parameter>\n`, then `</function>\n</tool_call>`; parallel calls are apart by a newline.
The arguments the schema requires come first, in the order of its `properties`, then any of the
optional ones, in that order too. A value the schema lets be a string is raw text that ends at
the first `</parameter>` (so it cannot hold one; one of an enum of strings is one of those);
any other value is JSON of its property's schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reame.grammar.lark_parts import MORE, in_order, json_rule, lark, mark, opening, text
from reame.tool_calls.choice import function_of, parameters_of
from reame.tool_calls.parameters import ordered_properties, types_of

_RAW_VALUE = 'raw_value[lazy]: TEXT "</parameter>"'
_VALUE_END = text("\n</parameter>\n")


def xml_grammar(
    tools: Sequence[dict[str, Any]], free: bool, many: bool, marks: Mapping[str, int]
) -> str:
    closer = mark("</tool_call>", marks)
    more = f' ("\\n" block){MORE}' if many else ""
    rules = [f'block: {mark("<tool_call>", marks)} "\\n" call "\\n" {closer}', _RAW_VALUE]
    rules.append("call: " + " | ".join(f"fn_{i}" for i in range(len(tools))))
    for i, tool in enumerate(tools):
        rules += _function(i, tool)
    if not free:
        return lark(f"start: block{more}", rules)
    opened, lazy = opening("<tool_call>", marks)
    return lark(f'start: TEXT | {opened} "\\n" call "\\n" {closer}{more}', rules + lazy)


def _function(i: int, tool: dict[str, Any]) -> list[str]:
    function = function_of(tool)
    lenient = function.get("strict") is not True
    rules, items = [], []
    for j, (key, schema, required) in enumerate(ordered_properties(parameters_of(tool))):
        tag = text(f"<parameter={key}>\n")
        value, more = _value(f"{i}_{j}", schema, lenient)
        rules += [f"arg_{i}_{j}: {tag} {value}", *more]
        items.append((f"arg_{i}_{j}", required))
    opened = text(f"<function={function.get('name', '')}>\n")
    return [f'fn_{i}: {opened} {in_order(items)} "</function>"', *rules]


def _value(name: str, schema: dict[str, Any], lenient: bool) -> tuple[str, list[str]]:
    """The value's rule, and the rules it needs of its own."""
    types = types_of(schema)
    if "string" not in types:
        return f"{json_rule(schema, lenient)} {_VALUE_END}", []
    choices = schema.get("enum")
    if types == ["string"] and isinstance(choices, list) and choices:
        return "(" + " | ".join(text(str(c)) for c in choices) + f") {_VALUE_END}", []
    low, high = schema.get("minLength"), schema.get("maxLength")
    if types == ["string"] and (isinstance(low, int) or isinstance(high, int)):
        # NOTE: a length bound ends the value where a small model would not
        bounds = f"{{{low or 0},{high if isinstance(high, int) else ''}}}"
        rule = f'bounded_{name}[lazy]: /(.|\\n){bounds}/ "\\n</parameter>"'
        return f'bounded_{name} "\\n"', [rule]
    # NOTE: the newline before </parameter> is the value's end, which the reader takes off
    return 'raw_value "\\n"', []
