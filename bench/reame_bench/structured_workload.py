"""`reame bench --structured`'s two seeded workloads (their words, schemas and tools are
data/structured_workload.json; how an answer is graded is structured_grade.py).

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
from dataclasses import dataclass
from importlib import resources
from typing import Any

EXTRACTION = "extraction"
TOOLS = "tools"
WORKLOADS = (EXTRACTION, TOOLS)
# room for a complete answer at every field's longest (the strings are bounded by maxLength)
MAX_TOKENS = {EXTRACTION: 256, TOOLS: 192}

# NOTE: the order schema is what pydantic's model_json_schema() gives for a model with a
# str-Enum field, forbidding extras
_DATA: dict[str, Any] = json.loads(
    resources.files("reame_bench").joinpath("data", "structured_workload.json").read_text("utf-8")
)
ORDER_SCHEMA: dict[str, Any] = _DATA["order_schema"]
STATUSES: tuple[str, ...] = tuple(ORDER_SCHEMA["$defs"]["Status"]["enum"])
EXTRACTION_SYSTEM: str = _DATA["extraction_system"]
TOOL_DEFINITIONS: list[dict[str, Any]] = _DATA["tools"]
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    tool["function"]["name"]: tool["function"]["parameters"] for tool in TOOL_DEFINITIONS
}
_CONVERT_ARGS = TOOL_SCHEMAS["convert_currency"]["properties"]
CURRENCIES: tuple[str, ...] = tuple(_CONVERT_ARGS["from_currency"]["enum"])
_UNITS: tuple[str, ...] = tuple(TOOL_SCHEMAS["get_weather"]["properties"]["unit"]["enum"])
TOOLS_SYSTEM: str = _DATA["tools_system"]
_FIRST: list[str] = _DATA["first_names"]
_LAST: list[str] = _DATA["last_names"]
_CITIES: list[str] = _DATA["cities"]
_GOODS: list[str] = _DATA["goods"]
_MONTHS: list[str] = _DATA["months"]
_STATUS_WORDS: dict[str, list[str]] = _DATA["status_words"]
_NOTES: list[str] = _DATA["order_notes"]
_WEATHER: list[str] = _DATA["weather_requests"]
_CONVERT: list[str] = _DATA["convert_requests"]
_REMIND: list[str] = _DATA["reminder_requests"]
_TASKS: list[str] = _DATA["reminder_tasks"]


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
        args = {"city": rng.choice(_CITIES), "unit": rng.choice(_UNITS)}
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
