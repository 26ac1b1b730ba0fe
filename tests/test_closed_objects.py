"""A schema's objects closed as llama.cpp closes them (model-free): listed properties and no
word on others means no others; what a schema says, and allOf's branches, are left alone."""

from __future__ import annotations

import copy

from reame.grammar.closed_objects import closed_objects

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "home": {"$ref": "#/$defs/Address"},
        "pets": {"type": "array", "items": {"type": "object", "properties": {"kind": {}}}},
        "properties": {"type": "object", "properties": {"x": {}}},
        "extra": {"anyOf": [{"type": "object", "properties": {"y": {}}}, {"type": "null"}]},
    },
    "required": ["name"],
    "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def test_every_listed_object_is_closed_and_the_input_is_not_changed() -> None:
    before = copy.deepcopy(PERSON)
    closed = closed_objects(PERSON)
    assert before == PERSON
    assert closed["additionalProperties"] is False
    assert closed["$defs"]["Address"]["additionalProperties"] is False
    assert closed["properties"]["pets"]["items"]["additionalProperties"] is False
    assert closed["properties"]["properties"]["additionalProperties"] is False
    assert closed["properties"]["extra"]["anyOf"][0]["additionalProperties"] is False
    # a property named "properties" is a property, not a map to close
    assert set(closed["properties"]) == set(PERSON["properties"])
    assert closed["required"] == ["name"]


def test_what_a_schema_says_stays() -> None:
    open_on_purpose = {"type": "object", "properties": {"a": {}}, "additionalProperties": True}
    typed = {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "integer"}}
    free = {"type": "object"}
    assert closed_objects(open_on_purpose) == open_on_purpose
    assert closed_objects(typed) == typed
    assert closed_objects(free) == free  # an object that lists nothing takes anything
    constant = {"const": {"properties": {"a": 1}}}
    assert closed_objects(constant) == constant


def test_all_of_branches_stay_open() -> None:
    merged = {
        "allOf": [
            {"type": "object", "properties": {"a": {}}},
            {"type": "object", "properties": {"b": {}}},
        ],
        "properties": {"a": {}},
    }
    closed = closed_objects(merged)
    assert all("additionalProperties" not in branch for branch in closed["allOf"])
    assert "additionalProperties" not in closed
