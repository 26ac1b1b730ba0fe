"""`reame bench --structured`'s two seeded workloads, and how an answer is graded.

extraction: short synthetic notes about an order (a name, a date, an amount, a city, a status,
a few items; phrased several ways) to be turned into JSON by a pydantic-like schema, sent as
`response_format` json_schema. tools: a system prompt, three tools with JSON-schema parameters
and a user message that needs one of them, sent with `tool_choice="required"`. Both at
temperature 0. The same seed gives the same requests on any machine; every item also carries the
object a perfect answer would hold, so accuracy can be read beside validity.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reame.bench.targets import Timeline

EXTRACTION = "extraction"
TOOLS = "tools"
WORKLOADS = (EXTRACTION, TOOLS)
# room for a complete answer at every field's longest (the strings are bounded by maxLength)
MAX_TOKENS = {EXTRACTION: 256, TOOLS: 192}
STATUSES = ("paid", "pending", "refunded")

# what pydantic's model_json_schema() gives for a model with a str-Enum field, forbidding extras
ORDER_SCHEMA: dict[str, Any] = {
    "$defs": {"Status": {"enum": list(STATUSES), "title": "Status", "type": "string"}},
    "additionalProperties": False,
    "properties": {
        "name": {"maxLength": 40, "title": "Name", "type": "string"},
        "city": {"maxLength": 30, "title": "City", "type": "string"},
        "date": {"maxLength": 10, "title": "Date", "type": "string"},
        "amount": {"maximum": 100000, "minimum": 0, "title": "Amount", "type": "integer"},
        "status": {"$ref": "#/$defs/Status"},
        "items": {
            "items": {"maxLength": 24, "type": "string"},
            "maxItems": 4,
            "title": "Items",
            "type": "array",
        },
    },
    "required": ["name", "city", "date", "amount", "status", "items"],
    "title": "Order",
    "type": "object",
}
EXTRACTION_SYSTEM = (
    "Extract the order described in the note as JSON: name (the customer), city, date "
    "(YYYY-MM-DD), amount (whole euros), status (paid, pending or refunded) and items (what "
    "was bought, one short string each)."
)

CURRENCIES = ("EUR", "USD", "GBP", "JPY")
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 40},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    "convert_currency": {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "minimum": 0},
            "from_currency": {"type": "string", "enum": list(CURRENCIES)},
            "to_currency": {"type": "string", "enum": list(CURRENCIES)},
        },
        "required": ["amount", "from_currency", "to_currency"],
        "additionalProperties": False,
    },
    "create_reminder": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": 60},
            "date": {"type": "string", "maxLength": 10},
            "hour": {"type": "integer", "minimum": 0, "maximum": 23},
        },
        "required": ["text", "date", "hour"],
        "additionalProperties": False,
    },
}
_TOOL_DESCRIPTIONS = {
    "get_weather": "The current weather in a city.",
    "convert_currency": "Convert an amount of money from one currency to another.",
    "create_reminder": "Set a reminder on a date (YYYY-MM-DD) at an hour of the day (0-23).",
}
TOOL_DEFINITIONS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {"name": name, "description": _TOOL_DESCRIPTIONS[name], "parameters": schema},
    }
    for name, schema in TOOL_SCHEMAS.items()
]
TOOLS_SYSTEM = (
    "You are an assistant with tools. Answer every request by calling exactly one of the tools "
    "with the arguments the user gave."
)

_FIRST = ("Maria", "John", "Aiko", "Lars", "Fatima", "Pedro", "Chen", "Olga", "Kwame", "Sofia")
_LAST = ("Rossi", "Smith", "Tanaka", "Berg", "Haddad", "Alves", "Wang", "Ivanova", "Mensah")
_CITIES = ("Turin", "Lisbon", "Osaka", "Oslo", "Cairo", "Porto", "Lyon", "Kyiv", "Accra", "Quito")
_GOODS = ("lamp", "chair", "rug", "kettle", "bicycle", "desk", "mirror", "teapot", "blanket")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_STATUS_WORDS = {
    "paid": ("paid in full", "settled", "paid"),
    "pending": ("not paid yet", "still pending", "awaiting payment"),
    "refunded": ("refunded", "returned and refunded", "money sent back"),
}
_NOTES = (
    "On {when}, {name} from {city} bought {goods} for {amount} euros; {status}.",
    "{name} ({city}) ordered {goods} on {when}. Total {amount} EUR, {status}.",
    "Order note, {when}: {goods}. Customer {name}, {city}. {amount} euros, {status}.",
    "{city}, {when}. {name} picked up {goods}: {amount} euros in all, {status}.",
)
_WEATHER = (
    "What's the weather like in {city} right now? Give it in {unit}.",
    "Is it cold in {city} today? I want the temperature in {unit}.",
)
_CONVERT = (
    "How much is {amount} {src} in {dst}?",
    "Convert {amount} {src} to {dst}, please.",
)
_REMIND = (
    "Remind me to {task} on {date} at {hour}:00.",
    "Set a reminder for {date}, hour {hour}: {task}.",
)
_TASKS = ("call {first}", "water the plants", "pay the rent", "book the train", "email {first}")


@dataclass(frozen=True, slots=True)
class Item:
    """One request of a workload: its messages, the fields that constrain it (response_format,
    or tools and tool_choice), and what a perfect answer holds (for tools: the tool's name and
    arguments)."""

    workload: str
    index: int
    messages: list[dict[str, Any]]
    constraint: dict[str, Any]
    expected: dict[str, Any]
    expected_tool: str | None = None

    def body(self, model: str, max_tokens: int | None = None) -> dict[str, Any]:
        """The chat completion request, streamed, with usage in the last chunk; Reame's
        speculation off, so the decode rates compare forced runs and not drafting."""
        return {
            "model": model,
            "messages": self.messages,
            **self.constraint,
            "max_tokens": max_tokens or MAX_TOKENS[self.workload],
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "speculation": "off",
        }


def _distinct(rng: random.Random, count: int, make: Any) -> list[Any]:
    """`count` outputs of make(rng) whose prompts differ (a repeat would be served warm)."""
    out, seen = [], set()
    while len(out) < count:
        item = make(rng)
        key = json.dumps(item[0])
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _order(rng: random.Random) -> tuple[str, dict[str, Any]]:
    year, month, day = rng.randint(2019, 2026), rng.randint(1, 12), rng.randint(1, 28)
    goods = rng.sample(_GOODS, rng.randint(1, 4))
    status = rng.choice(STATUSES)
    expected = {
        "name": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
        "city": rng.choice(_CITIES),
        "date": f"{year:04d}-{month:02d}-{day:02d}",
        "amount": rng.randint(5, 4000),
        "status": status,
        "items": goods,
    }
    when = rng.choice((f"{day} {_MONTHS[month - 1]} {year}", f"{_MONTHS[month - 1]} {day}, {year}"))
    listed = goods[0] if len(goods) == 1 else ", ".join(goods[:-1]) + f" and {goods[-1]}"
    note = rng.choice(_NOTES).format(
        when=when,
        name=expected["name"],
        city=expected["city"],
        goods=f"a {listed}" if len(goods) == 1 else listed,
        amount=expected["amount"],
        status=rng.choice(_STATUS_WORDS[status]),
    )
    return note, expected


def extraction_items(seed: int, count: int) -> list[Item]:
    rng = random.Random(f"structured-extraction:{seed}")
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "Order", "schema": ORDER_SCHEMA, "strict": True},
    }
    return [
        Item(
            EXTRACTION,
            i,
            [{"role": "system", "content": EXTRACTION_SYSTEM}, {"role": "user", "content": note}],
            {"response_format": response_format},
            expected,
        )
        for i, (note, expected) in enumerate(_distinct(rng, count, _order))
    ]


def _tool_request(rng: random.Random) -> tuple[str, dict[str, Any]]:
    tool = rng.choice(list(TOOL_SCHEMAS))
    if tool == "get_weather":
        args = {"city": rng.choice(_CITIES), "unit": rng.choice(("celsius", "fahrenheit"))}
        text = rng.choice(_WEATHER).format(**args)
    elif tool == "convert_currency":
        src, dst = rng.sample(CURRENCIES, 2)
        args = {"amount": rng.randint(1, 900) * 5, "from_currency": src, "to_currency": dst}
        text = rng.choice(_CONVERT).format(amount=args["amount"], src=src, dst=dst)
    else:
        task = rng.choice(_TASKS).format(first=rng.choice(_FIRST))
        date = f"{rng.randint(2025, 2027)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        args = {"text": task, "date": date, "hour": rng.randint(6, 21)}
        text = rng.choice(_REMIND).format(task=task, date=date, hour=args["hour"])
    return text, {"tool": tool, "arguments": args}


def tool_items(seed: int, count: int) -> list[Item]:
    rng = random.Random(f"structured-tools:{seed}")
    constraint = {"tools": TOOL_DEFINITIONS, "tool_choice": "required"}
    return [
        Item(
            TOOLS,
            i,
            [{"role": "system", "content": TOOLS_SYSTEM}, {"role": "user", "content": text}],
            constraint,
            want["arguments"],
            expected_tool=want["tool"],
        )
        for i, (text, want) in enumerate(_distinct(rng, count, _tool_request))
    ]


def workload_items(workload: str, seed: int, count: int) -> list[Item]:
    return (extraction_items if workload == EXTRACTION else tool_items)(seed, count)


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
    try:
        import jsonschema
    except ImportError as exc:  # NOTE: a dev dependency, not the server's
        from reame.errors import ConfigError

        raise ConfigError(
            "reame bench --structured needs jsonschema: pip install jsonschema"
        ) from exc
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
