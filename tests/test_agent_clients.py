"""Agent clients whose pins clash with this environment's, each from the package index in a
virtual environment of its own (client_venv.py), unmodified, against a real `reame serve` on the
embedded SmolLM2: the OpenAI Agents SDK running an agent with a function tool through the
Responses API (the whole input re-sent each turn, and chained by previous_response_id: either
way the second turn reads the first's prompt from what the server kept), and instructor's
TOOLS, JSON and JSON_SCHEMA modes making the same object."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from client_venv import client_venv, run_client
from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

KEY = "agent-clients-key"
MODEL = "smollm2-135m"
AGENTS = "openai-agents==0.24.0"
INSTRUCTOR = "instructor==1.17.0"  # NOTE: pins jiter<0.15, so openai 3.3.0 comes with it


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(parallel=2, context_length=2048, env={"REAME_API_KEYS": KEY})
    try:
        yield srv
    finally:
        srv.stop()


def test_the_agents_sdk_runs_an_agent_to_its_tool_call(server: ServerProcess) -> None:
    seen = run_client(client_venv(AGENTS), "agents_weather.py", server.url, KEY, MODEL)
    for way in ("whole", "chained"):
        run = seen[way]
        assert run["calls"] and all(isinstance(c, str) and c for c in run["calls"]), run
        first, second = run["usages"][:2]
        assert second["cached"] >= first["input"], (way, run["usages"])
        assert all(i.startswith("resp_") for i in run["ids"])


def test_instructor_makes_the_object_in_its_tools_json_and_json_schema_modes(
    server: ServerProcess,
) -> None:
    """TOOLS failed before grammar/closed_objects.py (an open object ran to max_tokens)."""
    seen = run_client(client_venv(INSTRUCTOR), "instructor_modes.py", server.url, KEY, MODEL)
    for mode in ("TOOLS", "JSON", "JSON_SCHEMA"):
        assert seen[mode] == {"object": {"name": "Turin", "country": "Italy"}}, (mode, seen)
