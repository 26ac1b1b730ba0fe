"""The grammar (llguidance's Lark) that a tool-calling answer must match.

Each call is written literally up to its arguments, `{"name":"f","arguments":`, and the
arguments are the function's own JSON schema (`%json`), so its `$ref`s resolve as written.
With tool_choice "auto" the answer is free text until the model writes the family's opening
marker (a lazy lexeme: it ends as soon as the marker is seen); only the call is constrained.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from reame.errors import InvalidRequestError
from reame.tools.choice import choice_mode, chosen_name, function_of, parameters_of

TEXT = "TEXT: /(.|\\n)*/"
# NOTE: a small model, once it may add a call, tends to add the same one until max_tokens: a
# turn holds at most this many parallel calls (OpenAI sets no number; agents rarely need more)
MAX_PARALLEL_CALLS = 4
MORE = f"{{0,{MAX_PARALLEL_CALLS - 1}}}"


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
    build = {"hermes": _hermes, "llama3": _llama3, "mistral": _mistral}.get(family, _generic)
    # NOTE: Llama 3 templates refuse more than one call a turn
    many = parallel_tool_calls and mode != "named" and family != "llama3"
    return build(tools, mode == "auto", many, marks)


def _hermes(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    closer = _mark("</tool_call>", marks)
    more = f' ("\\n" block){MORE}' if many else ""
    rules = [f'block: {_mark("<tool_call>", marks)} "\\n" call "\\n" {closer}']
    rules += _calls(tools, "arguments")
    if not free:
        return _lark(f"start: block{more}", rules)
    opening, lazy = _opening("<tool_call>", marks)
    return _lark(f'start: TEXT | {opening} "\\n" call "\\n" {closer}{more}', rules + lazy)


def _mistral(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    rules = [f'calls: "[" call {_more(many)}"]"', "ID: /[a-zA-Z0-9]{9}/"]
    rules += _calls(tools, "arguments", ending='",\\"id\\":\\"" ID "\\"}"')
    if not free:
        return _lark(f"start: {_mark('[TOOL_CALLS]', marks)} calls", rules)
    opening, lazy = _opening("[TOOL_CALLS]", marks)
    return _lark(f"start: TEXT | {opening} calls", rules + lazy)


def _llama3(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    rules = _calls(tools, "parameters")
    if not free:
        return _lark("start: call", rules)
    # NOTE: a Llama 3 model opens a call with `{"name":` or, now and then, <|python_tag|>;
    # after the first, the rest of the call is named_i
    rules.append("named: " + " | ".join(f"named_{i}" for i in range(len(tools))))
    rules += [
        f'named_{i}: {_text(name)} "\\",\\"parameters\\":" {_json(tool)} "}}"'
        for i, (name, tool) in enumerate(_named(tools))
    ]
    tagged, tag_rules = _opening("<|python_tag|>", marks)
    braced, brace_rules = _opening('{"name":"', {})
    start = f"start: TEXT | {tagged} call | {braced} named"
    return _lark(start, rules + tag_rules + brace_rules)


def _generic(tools: Sequence[dict], free: bool, many: bool, marks: Mapping[str, int]) -> str:
    calls = '"{\\"tool_calls\\":[" call ' + _more(many) + '"]}"'
    rules = _calls(tools, "arguments")
    if not free:
        return _lark(f"start: {calls}", rules)
    # NOTE: as llama.cpp's generic format: the answer is JSON either way, so a model that
    # was never taught tools still gets a shape it can follow from the system prompt
    answer = '"{\\"response\\":" %json ' + json.dumps(_compact({"type": "string"})) + ' "}"'
    return _lark(f"start: {calls} | {answer}", rules)


def _more(many: bool) -> str:
    return f'("," call){MORE} ' if many else ""


def _calls(tools: Sequence[dict], key: str, ending: str = '"}"') -> list[str]:
    alternatives = " | ".join(f"fn_{i}" for i in range(len(tools)))
    return [f"call: {alternatives}"] + [
        f"fn_{i}: {_text('{' + _jkey('name') + json.dumps(name) + ',' + _jkey(key))} "
        f"{_json(tool)} {ending}"
        for i, (name, tool) in enumerate(_named(tools))
    ]


def _named(tools: Sequence[dict]) -> list[tuple[str, dict]]:
    return [(str(function_of(t).get("name", "")), t) for t in tools]


def _json(tool: dict) -> str:
    schema = parameters_of(tool)
    lenient = function_of(tool).get("strict") is not True
    return "%json " + json.dumps(_compact(schema, lenient), ensure_ascii=False)


def _compact(schema: dict[str, Any], lenient: bool = False) -> dict[str, Any]:
    # NOTE: no free whitespace: a small model pads JSON with newlines to max_tokens otherwise;
    # lenient (unknown keywords ignored) unless the tool asks for strict, as OpenAI does
    options = {**schema.get("x-guidance", {}), "whitespace_flexible": False}
    if lenient:
        options["lenient"] = True
    return {**schema, "x-guidance": options}


def _jkey(key: str) -> str:
    return json.dumps(key) + ":"


def _text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _mark(marker: str, marks: Mapping[str, int]) -> str:
    return f"<[{marks[marker]}]>" if marker in marks else _text(marker)


def _opening(marker: str, marks: Mapping[str, int]) -> tuple[str, list[str]]:
    """Free text then the marker, and the rules it needs. A special token ends TEXT by itself
    (TEXT cannot match it); a textual marker needs a lazy lexeme, else TEXT would swallow it."""
    if marker in marks:
        return f"TEXT {_mark(marker, marks)}", []
    name = "open_" + "".join(c for c in marker if c.isalnum()).lower()
    return name, [f"{name}[lazy]: TEXT {_text(marker)}"]


def _lark(start: str, rules: list[str]) -> str:
    lines = [start, *rules]
    if any("TEXT" in line for line in lines):
        lines.insert(1, TEXT)
    return "\n".join(lines) + "\n"
