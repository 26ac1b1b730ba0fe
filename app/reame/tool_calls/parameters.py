"""A function's parameters one at a time, for the formats that write each argument apart (XML,
Python): their schemas in the order a call writes them, and values read back as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from reame.tool_calls.choice import function_of, parameters_of

_DEFS = ("$defs", "definitions")


def parameters_by_name(tools: Sequence[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    return {str(function_of(t).get("name", "")): parameters_of(t) for t in tools or ()}


def ordered_properties(parameters: dict[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
    """(key, schema, required) of each argument: the required ones first, in the order of
    `properties` (a required key it leaves out last, of any value), then the optional ones."""
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = [k for k in dict.fromkeys(parameters.get("required") or ()) if isinstance(k, str)]
    keys = [k for k in properties if k in required] + [k for k in required if k not in properties]
    keys += [k for k in properties if k not in required]
    return [(k, property_schema(parameters, properties.get(k)), k in required) for k in keys]


def property_schema(parameters: dict[str, Any], schema: Any) -> dict[str, Any]:
    """One property's schema, standing alone: with the definitions its `$ref`s point into."""
    out = dict(schema) if isinstance(schema, dict) else {}
    if "$ref" not in json.dumps(out):
        return out
    for key in _DEFS:
        if key in parameters and key not in out:
            out[key] = parameters[key]
    return out


def types_of(schema: dict[str, Any]) -> list[str]:
    """The JSON types a schema allows, as far as its `type` (or a local `$ref`, or an enum of
    strings) says; [] when it does not say."""
    schema = _resolved(schema)
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        return ["string"]
    return []


def typed_value(raw: str, schema: dict[str, Any] | None) -> Any:
    """A value written raw (XML): a string parameter's text as it is; anything else as JSON if
    it reads as JSON, else the text."""
    if schema is not None and types_of(schema) == ["string"]:
        return raw
    try:
        return json.loads(raw, parse_constant=_not_finite)
    except ValueError:
        return raw


def json_text(value: Any) -> str | None:
    """Compact JSON, as ToolCall.arguments holds it; None for what JSON cannot hold (bytes,
    sets, NaN, a lone surrogate)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return None
    return text


def _resolved(schema: dict[str, Any]) -> dict[str, Any]:
    for _ in range(8):  # NOTE: a bound: definitions may point at each other
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            break
        place, _, name = ref.removeprefix("#/").partition("/")
        target = (schema.get(place) or {}).get(name) if place in _DEFS else None
        if not isinstance(target, dict):
            break
        schema = {**target, **{k: v for k, v in schema.items() if k in _DEFS}}
    return schema


def _not_finite(constant: str) -> Any:
    raise ValueError(constant)
