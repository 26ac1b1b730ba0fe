"""The OpenAI Agents SDK, unmodified: an agent with a function tool runs against Reame's
Responses API until it has called the tool and answered, once sending the whole input each turn
(the SDK's default) and once chaining by previous_response_id; a call is required on both turns,
so the run ends at its turn limit. Prints what it saw as JSON.
Usage: agents_weather.py BASE_URL KEY MODEL"""

import asyncio
import json
import sys

from agents import (
    Agent,
    ModelSettings,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)
from agents.exceptions import MaxTurnsExceeded
from openai import AsyncOpenAI

base_url, key, model = sys.argv[1:4]
calls: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather now in a city."""
    calls.append(city)
    return f"18 C and sunny in {city}"


async def run(chained: bool) -> dict:
    calls.clear()
    agent = Agent(
        name="weather",
        instructions="You tell the weather. Call get_weather for the city asked about.",
        model=model,
        tools=[get_weather],
        reset_tool_choice=False,  # NOTE: both turns alike, so the second reads the first's prefix
        model_settings=ModelSettings(
            tool_choice="required", parallel_tool_calls=False, temperature=0.0, max_tokens=120
        ),
    )
    try:
        result = await Runner.run(
            agent,
            "What is the weather in Turin?",
            max_turns=2,
            auto_previous_response_id=chained,
        )
        raw, final = result.raw_responses, result.final_output
    except MaxTurnsExceeded as exc:
        raw, final = exc.run_data.raw_responses if exc.run_data else [], None
    usages = [
        {"input": r.usage.input_tokens, "cached": r.usage.input_tokens_details.cached_tokens}
        for r in raw
    ]
    return {
        "calls": list(calls),
        "final": final,
        "usages": usages,
        "ids": [r.response_id for r in raw],
    }


async def main() -> None:
    set_tracing_disabled(True)
    set_default_openai_client(AsyncOpenAI(base_url=base_url + "/v1", api_key=key), False)
    set_default_openai_api("responses")
    print(json.dumps({"whole": await run(False), "chained": await run(True)}))


asyncio.run(main())
