"""A JSON schema's objects closed as llama.cpp closes them: an object schema that lists its
`properties` and says nothing of `additionalProperties` takes no others. Pure.

JSON Schema lets such an object hold any other key, and llguidance keeps to that; llama.cpp's
converter (common/json-schema.cpp), and so llama-server and Ollama, allow none. Clients send
schemas written for those servers: instructor's and pydantic's leave `additionalProperties`
out, and a small model under an open object writes key after key to max_tokens (SmolLM2 on
instructor's TOOLS mode did). An object inside `allOf`, or beside one, is left open: closing
one branch would refuse the properties of the others.
"""

from __future__ import annotations

from typing import Any

# keywords whose value maps names to schemas (not a schema itself), and values that are data
_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_DATA = ("const", "enum", "default", "examples", "x-guidance", "required")


def closed_objects(schema: Any, in_all_of: bool = False) -> Any:
    """A copy of `schema` with its listed objects closed (the input is not changed)."""
    if isinstance(schema, list):
        return [closed_objects(s, in_all_of) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DATA:
            out[key] = value
        elif key in _MAPS and isinstance(value, dict):
            out[key] = {name: closed_objects(sub) for name, sub in value.items()}
        else:
            out[key] = closed_objects(value, in_all_of=key == "allOf")
    is_open = isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema
    if is_open and not in_all_of and "allOf" not in schema:
        out["additionalProperties"] = False
    return out
