"""Tool calls in every format Reame reads, forced on the embedded SmolLM2 through a real
template of that format (`--chat-template-file`; the generic form through SmolLM2's own), read
back by the real `openai` client to valid arguments, whole and streamed. Qwen3.5's template
also opens a thought in its generation prompt: its call comes after the thought."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from openai import OpenAI

from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

TEMPLATES = Path(__file__).parent / "templates"
FORMATS = {
    "qwen3_coder": "Qwen3.5-4B.jinja",
    "lfm2": "LFM2-8B-A1B.jinja",
    "hermes": "Qwen-Qwen3-0.6B.jinja",
    "llama3": "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "mistral": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "generic": None,  # SmolLM2's own template, which knows nothing of tools
}
BOOK = {
    "type": "function",
    "function": {
        "name": "book_table",
        "description": "Book a table at a restaurant",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "people": {"type": "integer", "minimum": 1, "maximum": 20},
                "outside": {"type": "boolean"},
            },
            "required": ["city", "people", "outside"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "Book a table for 4 in Rome, outside please."}]


@pytest.fixture(scope="module", params=sorted(FORMATS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, ServerProcess]]:
    name = FORMATS[request.param]
    template = ("--chat-template-file", str(TEMPLATES / name)) if name else ()
    srv = small_server(*template, context_length=1024)
    yield request.param, srv
    srv.stop()


def call(srv: ServerProcess, **kwargs):
    client = OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0)
    return client.chat.completions.create(
        model="smollm2-135m",
        messages=ASK,
        tools=[BOOK],
        temperature=0,
        max_tokens=320,
        extra_body={"reasoning_budget": 8},
        **kwargs,
    )


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "book_table"}}]
)
def test_a_forced_call_parses_back_to_valid_arguments(served, choice) -> None:
    _, srv = served
    message = call(srv, tool_choice=choice).choices[0].message
    assert message.tool_calls, message.content
    for tool_call in message.tool_calls:
        assert tool_call.function.name == "book_table"
        jsonschema.validate(
            json.loads(tool_call.function.arguments), BOOK["function"]["parameters"]
        )


def test_a_streamed_forced_call_reassembles_to_valid_arguments(served) -> None:
    family, srv = served
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in call(srv, tool_choice="required", stream=True):
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        for delta in chunk.choices[0].delta.tool_calls or []:
            entry = calls.setdefault(delta.index, {"name": "", "arguments": ""})
            entry["name"] += delta.function.name or ""
            entry["arguments"] += delta.function.arguments or ""
    assert calls and finish == "tool_calls", family
    for entry in calls.values():
        assert entry["name"] == "book_table"
        jsonschema.validate(json.loads(entry["arguments"]), BOOK["function"]["parameters"])


def test_the_conversation_goes_on_after_the_call_in_the_templates_own_form(served) -> None:
    _, srv = served
    first = call(srv, tool_choice="required").choices[0].message
    client = OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0)
    history = [
        *ASK,
        first.model_dump(exclude_none=True),
        *(
            {"role": "tool", "tool_call_id": c.id, "content": '{"booked": true}'}
            for c in first.tool_calls
        ),
    ]
    answer = client.chat.completions.create(
        model="smollm2-135m", messages=history, tools=[BOOK], temperature=0, max_tokens=48
    )
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
