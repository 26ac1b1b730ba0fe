"""The grammar (llguidance's Lark) that a tool-calling answer must match.

Each call is written literally up to its arguments, `{"name":"f","arguments":`, and the
arguments are the function's own JSON schema (`%json`), so its `$ref`s resolve as written.
With tool_choice "auto" the answer is free text until the model writes the family's opening
marker (a lazy lexeme: it ends as soon as the marker is seen); only the call is constrained.
The families that write each argument apart (XML, Python) build theirs in xml.py and
pythonic.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reame.errors import InvalidRequestError
from reame.grammar.lark_parts import MORE, compact, json_rule, lark, mark, opening, text
from reame.grammar.pythonic import pythonic_grammar
from reame.grammar.xml import xml_grammar
from reame.tool_calls.choice import choice_mode, chosen_name, function_of, parameters_of

_BUILDERS = {"qwen3_coder": xml_grammar, "lfm2": pythonic_grammar}


def tool_grammar(
    tools: Sequence[dict[str, Any]] | None,
    tool_choice: Any,
    parallel_tool_calls: bool = True,
    family: str = "generic",
    special_tokens: Mapping[str, int] | None = None,
) -> str | None:
    """The Lark grammar of the answer, or None when it is free (no tools, tool_choice "none").
    `special_tokens`: the family's markers (family.MARKERS) that are one special token of the
    model, by id; the others are matched as text."""
    mode = choice_mode(tool_choice, tools)
    if mode == "none" or not tools:
        return None
    if mode == "named":
        tools = [t for t in tools if function_of(t).get("name") == chosen_name(tool_choice)]
        if not tools:
            raise InvalidRequestError("tool_choice: names no tool of the request", "tool_choice")
    marks = special_tokens or {}
    builders = {"hermes": _hermes, "llama3": _llama3, "mistral": _mistral, **_BUILDERS}
    build = builders.get(family, _generic)
    # NOTE: Llama 3 templates refuse more than one call a turn
    many = parallel_tool_calls and mode != "named" and family != "llama3"
    return build(tools, mode == "auto", many, marks)


def _hermes(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    closer = mark("</tool_call>", marks)
    more = f' ("\\n" block){MORE}' if many else ""
    rules = [f'block: {mark("<tool_call>", marks)} "\\n" call "\\n" {closer}']
    rules += _calls(tools, "arguments")
    if not free:
        return lark(f"start: block{more}", rules)
    opened, lazy = opening("<tool_call>", marks)
    return lark(f'start: TEXT | {opened} "\\n" call "\\n" {closer}{more}', rules + lazy)


def _mistral(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    rules = [f'calls: "[" call {_more(many)}"]"', "ID: /[a-zA-Z0-9]{9}/"]
    rules += _calls(tools, "arguments", ending='",\\"id\\":\\"" ID "\\"}"')
    if not free:
        return lark(f"start: {mark('[TOOL_CALLS]', marks)} calls", rules)
    opened, lazy = opening("[TOOL_CALLS]", marks)
    return lark(f"start: TEXT | {opened} calls", rules + lazy)


def _llama3(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    rules = _calls(tools, "parameters")
    if not free:
        return lark("start: call", rules)
    # NOTE: a Llama 3 model opens a call with `{"name":` or, now and then, <|python_tag|>;
    # after the first, the rest of the call is named_i
    rules.append("named: " + " | ".join(f"named_{i}" for i in range(len(tools))))
    rules += [
        f'named_{i}: {text(name)} "\\",\\"parameters\\":" {_json(tool)} "}}"'
        for i, (name, tool) in enumerate(_named(tools))
    ]
    tagged, tag_rules = opening("<|python_tag|>", marks)
    braced, brace_rules = opening('{"name":"', {})
    start = f"start: TEXT | {tagged} call | {braced} named"
    return lark(start, rules + tag_rules + brace_rules)


def _generic(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    calls = '"{\\"tool_calls\\":[" call ' + _more(many) + '"]}"'
    rules = _calls(tools, "arguments")
    if not free:
        return lark(f"start: {calls}", rules)
    # NOTE: as llama.cpp's generic format: the answer is JSON either way, so a model that
    # was never taught tools still gets a shape it can follow from the system prompt
    answer = '"{\\"response\\":" %json ' + json.dumps(compact({"type": "string"})) + ' "}"'
    return lark(f"start: {calls} | {answer}", rules)


def _more(many: bool) -> str:
    return f'("," call){MORE} ' if many else ""


def _calls(tools: Sequence[dict], key: str, ending: str = '"}"') -> list[str]:
    alternatives = " | ".join(f"fn_{i}" for i in range(len(tools)))
    return [f"call: {alternatives}"] + [
        f"fn_{i}: {text('{' + _jkey('name') + json.dumps(name) + ',' + _jkey(key))} "
        f"{_json(tool)} {ending}"
        for i, (name, tool) in enumerate(_named(tools))
    ]


def _named(tools: Sequence[dict]) -> list[tuple[str, dict]]:
    return [(str(function_of(t).get("name", "")), t) for t in tools]


def _json(tool: dict) -> str:
    return json_rule(parameters_of(tool), function_of(tool).get("strict") is not True)


def _jkey(key: str) -> str:
    return json.dumps(key) + ":"
