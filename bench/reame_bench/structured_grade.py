"""How an answer to a `reame bench --structured` item is graded: valid by the schema (or the
tool's parameters), and how much of what a perfect answer holds it holds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jsonschema

from reame_bench.structured_workload import EXTRACTION, MAX_TOKENS, ORDER_SCHEMA, TOOL_SCHEMAS, Item
from reame_bench.targets import Timeline


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, as the server sent it


@dataclass(slots=True)
class Answer:
    """One answer as the client saw it: `timeline.text` holds the content."""

    timeline: Timeline
    finish_reason: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)

    @property
    def signature(self) -> str:
        """What two answers must share to be the same answer."""
        calls = [(c.name, c.arguments) for c in self.tool_calls]
        return json.dumps([self.timeline.text, calls])


@dataclass(frozen=True, slots=True)
class Grade:
    """`is_valid`: None when the answer ran to max_tokens (or ended otherwise), so it was not
    judged; `is_tool_call_valid`: None outside the tools workload; `accuracy`: share of the
    expected fields found (extraction) or 1/0 for the expected tool with the expected
    arguments (tools), None when not valid."""

    finish_reason: str | None
    is_valid: bool | None
    is_tool_call_valid: bool | None = None
    accuracy: float | None = None
    problem: str = ""

    @property
    def is_length(self) -> bool:
        return self.finish_reason == "length"


def _validator(schema: dict[str, Any]) -> Any:
    return jsonschema.Draft202012Validator(schema)


def schema_problem(schema: dict[str, Any], value: Any) -> str:
    """'' when `value` matches `schema`, else the first error."""
    error = next(iter(_validator(schema).iter_errors(value)), None)
    return "" if error is None else f"{'/'.join(map(str, error.path))}: {error.message}"[:200]


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, str) and isinstance(got, str):
        return got.strip().casefold() == want.casefold()
    if isinstance(want, list) and isinstance(got, list):
        return sorted(_norm(g) for g in got) == sorted(_norm(w) for w in want)
    if isinstance(want, int | float) and isinstance(got, int | float):
        return float(got) == float(want)
    return got == want


def _norm(value: Any) -> Any:
    return value.strip().casefold() if isinstance(value, str) else json.dumps(value)


def _accuracy(got: dict[str, Any], want: dict[str, Any]) -> float:
    return sum(_same(got.get(k), v) for k, v in want.items()) / len(want)


def grade(item: Item, answer: Answer) -> Grade:
    graded = _grade(item, answer)
    at_cap = answer.timeline.num_tokens >= MAX_TOKENS[item.workload]
    if graded.problem and at_cap and not graded.is_length:
        # NOTE: a server that stopped at max_tokens should say "length"
        note = f"{graded.problem} (at max_tokens, yet finish_reason {answer.finish_reason})"
        return replace(graded, problem=note)
    return graded


def _grade(item: Item, answer: Answer) -> Grade:
    reason = answer.finish_reason
    if item.workload == EXTRACTION:
        if reason != "stop":
            return Grade(reason, None, problem=f"finish_reason {reason}")
        try:
            value = json.loads(answer.timeline.text)
        except ValueError as exc:
            return Grade(reason, False, problem=f"not JSON: {exc}")
        problem = schema_problem(ORDER_SCHEMA, value)
        if problem:
            return Grade(reason, False, problem=problem)
        return Grade(reason, True, accuracy=_accuracy(value, item.expected))
    if reason not in ("tool_calls", "stop"):
        return Grade(reason, None, False, problem=f"finish_reason {reason}")
    return _grade_calls(item, answer.tool_calls, reason)


def _grade_calls(item: Item, calls: Sequence[ToolCall], reason: str) -> Grade:
    if not calls:
        return Grade(reason, False, False, problem="no tool call")
    for call in calls:
        if call.name not in TOOL_SCHEMAS:
            return Grade(reason, False, False, problem=f"unknown tool {call.name!r}")
        try:
            arguments = json.loads(call.arguments)
        except ValueError as exc:
            return Grade(reason, False, False, problem=f"arguments not JSON: {exc}")
        problem = schema_problem(TOOL_SCHEMAS[call.name], arguments)
        if problem:
            return Grade(reason, False, False, problem=f"{call.name}: {problem}")
    first = calls[0]
    is_right = first.name == item.expected_tool and (
        _accuracy(json.loads(first.arguments), item.expected) == 1.0
    )
    return Grade(reason, True, True, accuracy=float(is_right))
