"""A real `reame serve` on 127.0.0.1 driven by the real `openai` client (and raw httpx where the
client would hide what is on the wire). Nothing of Reame or of the HTTP layer is mocked."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai import OpenAI

from server_process import ServerProcess

pytestmark = pytest.mark.model

KEY = "test-key-1"
MODEL = "smollm2-135m"
COLORS = [{"role": "user", "content": "Name three colors."}]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess(
        "--threads",
        "2",
        "--parallel",
        "4",
        "--context-length",
        "1024",
        "--api-key",
        KEY,
        env={"REAME_MAX_N": "4", "REAME_MAX_BODY_BYTES": "65536"},
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)


def raw(server: ServerProcess, method: str, path: str, **kwargs) -> httpx.Response:
    headers = {"authorization": f"Bearer {KEY}", **kwargs.pop("headers", {})}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=60, **kwargs)


def assert_openai_error(response: httpx.Response, status: int, needle: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert needle in body["error"]["message"]
    assert "Traceback" not in response.text
    return body["error"]


def test_models_are_listed(client: OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_chat_answers_with_usage(client: OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=COLORS, temperature=0, max_tokens=20)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.choices[0].message.role == "assistant"
    assert "1. Red" in r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 20
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.usage.prompt_tokens_details.cached_tokens == 0


def test_the_running_gauge_returns_to_idle_after_an_answer(
    client: OpenAI, server: ServerProcess
) -> None:
    client.chat.completions.create(model=MODEL, messages=COLORS, temperature=0, max_tokens=5)
    assert server.metric("reame_running_sequences") == 0
    assert server.metric("reame_waiting_requests") == 0


def test_completion_takes_a_string_or_a_list_of_prompts(client: OpenAI) -> None:
    one = client.completions.create(
        model=MODEL, prompt="The capital of France is", temperature=0, max_tokens=4
    )
    assert one.object == "text_completion" and "Paris" in one.choices[0].text
    assert one.choices[0].finish_reason == "length"
    two = client.completions.create(
        model=MODEL, prompt=["One, two,", "The capital of France is"], temperature=0, max_tokens=4
    )
    assert [c.index for c in two.choices] == [0, 1]
    assert two.choices[1].text == one.choices[0].text


def test_streaming_frames_like_openai_with_usage_last(client: OpenAI) -> None:
    whole = (
        client.chat.completions.create(model=MODEL, messages=COLORS, temperature=0, max_tokens=20)
        .choices[0]
        .message.content
    )
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=COLORS,
            temperature=0,
            max_tokens=20,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_the_wire_format_ends_with_done(server: ServerProcess) -> None:
    body = {"model": MODEL, "messages": COLORS, "max_tokens": 3, "stream": True}
    text = raw(server, "POST", "/v1/chat/completions", json=body).text
    events = [e for e in text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[0][6:])["object"] == "chat.completion.chunk"


def test_n_choices_stream_with_their_index(client: OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=COLORS, temperature=0.9, seed=3, max_tokens=8, n=3
    )
    assert [c.index for c in r.choices] == [0, 1, 2]
    chunks = list(
        client.chat.completions.create(model=MODEL, messages=COLORS, max_tokens=5, n=2, stream=True)
    )
    assert {c.choices[0].index for c in chunks} == {0, 1}


def test_a_stop_string_ends_the_answer_before_it(client: OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=COLORS, temperature=0, max_tokens=20, stop=["2."]
    )
    assert r.choices[0].message.content.strip() == "1. Red"
    assert r.choices[0].finish_reason == "stop"


def test_a_seed_reproduces_a_sampled_answer(client: OpenAI) -> None:
    def ask(seed: int) -> str:
        return (
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "Tell me a story."}],
                temperature=1.0,
                seed=seed,
                max_tokens=24,
            )
            .choices[0]
            .message.content
        )

    assert ask(11) == ask(11)
    assert ask(11) != ask(12)


def test_logprobs_come_with_their_alternatives(client: OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=COLORS, temperature=0, max_tokens=4, logprobs=True, top_logprobs=2
    )
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    assert all(t.logprob <= 0 and len(t.top_logprobs) == 2 for t in content)


def test_a_missing_or_wrong_key_is_a_401(server: ServerProcess) -> None:
    wrong = OpenAI(base_url=f"{server.url}/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.models.list()
    assert caught.value.status_code == 401
    missing = httpx.get(f"{server.url}/v1/models", timeout=10)
    assert_openai_error(missing, 401, "API key")
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"model": MODEL, "messages": COLORS, "temperature": 3}, 400, "temperature"),
        ({"model": MODEL, "messages": COLORS, "max_tokens": "many"}, 400, "max_tokens"),
        # NOTE: JSON's true is no integer or number (pydantic took it as 1)
        ({"model": MODEL, "messages": COLORS, "max_tokens": True}, 400, "max_tokens"),
        ({"model": MODEL, "messages": COLORS, "temperature": True}, 400, "temperature"),
        ({"model": MODEL, "messages": COLORS, "top_p": 0}, 400, "top_p"),
        ({"model": MODEL, "messages": COLORS, "frobnicate": 1}, 400, "Unrecognized"),
        ({"model": MODEL, "messages": []}, 400, "messages"),
        ({"model": MODEL}, 400, "Missing required parameter: 'messages'"),
        ({"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, 400, "role"),
        ({"model": MODEL, "messages": COLORS, "n": 9}, 400, "limit of 4"),
        ({"model": MODEL, "messages": COLORS, "logit_bias": {"999999": 1}}, 400, "out of range"),
        ({"model": "gpt-4", "messages": COLORS}, 404, "does not exist"),
    ],
)
def test_bad_requests_get_openai_shaped_errors(server: ServerProcess, body, status, needle) -> None:
    assert_openai_error(raw(server, "POST", "/v1/chat/completions", json=body), status, needle)


# NOTE: a flag takes JSON's true or false only (pydantic took 1, "true" and "yes" as true)
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"stream": "true"}, "stream"),
        ({"logprobs": 1}, "logprobs"),
        ({"ignore_eos": 0}, "ignore_eos"),
        ({"answer_memory": "false"}, "answer_memory"),
        ({"vote_early_stop": "yes"}, "vote_early_stop"),
        ({"parallel_tool_calls": 1}, "parallel_tool_calls"),
        ({"continue_final_message": 0}, "continue_final_message"),
        ({"stream": True, "stream_options": {"include_usage": 1}}, "include_usage"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": 1}}},
            "strict",
        ),
    ],
)
def test_a_flag_given_as_a_number_or_a_string_is_a_400(
    server: ServerProcess, extra: dict, needle: str
) -> None:
    body = {"model": MODEL, "messages": COLORS, "max_tokens": 2, **extra}
    assert_openai_error(raw(server, "POST", "/v1/chat/completions", json=body), 400, needle)


def test_malformed_json_is_a_400(server: ServerProcess) -> None:
    r = raw(
        server,
        "POST",
        "/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert_openai_error(r, 400, "not valid JSON")


def test_a_prompt_longer_than_the_context_gives_the_counts(server: ServerProcess) -> None:
    body = {"model": MODEL, "prompt": "word " * 1100, "max_tokens": 4}
    error = assert_openai_error(raw(server, "POST", "/v1/completions", json=body), 400, "tokens")
    assert "1024" in error["message"] and error["param"] == "prompt"


def test_a_streamed_call_that_cannot_be_served_is_still_an_http_error(
    server: ServerProcess,
) -> None:
    long_chat = [{"role": "user", "content": "word " * 1100}]
    body = {"model": MODEL, "messages": long_chat, "max_tokens": 4, "stream": True}
    assert_openai_error(raw(server, "POST", "/v1/chat/completions", json=body), 400, "tokens")


def test_a_body_over_the_limit_is_a_413(server: ServerProcess) -> None:
    body = {"model": MODEL, "prompt": "x" * 70_000}
    assert_openai_error(raw(server, "POST", "/v1/completions", json=body), 413, "larger")


def test_an_unknown_route_is_a_404_json(server: ServerProcess) -> None:
    assert_openai_error(raw(server, "GET", "/v1/nothing-here"), 404, "No such route")


def test_request_ids_come_back(server: ServerProcess) -> None:
    r = raw(server, "GET", "/v1/models", headers={"x-request-id": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    assert len(raw(server, "GET", "/v1/models").headers["x-request-id"]) == 32


def test_four_streams_share_batches_and_match_their_solo_answers(
    client: OpenAI, server: ServerProcess
) -> None:
    questions = ["Name three colors.", "What is Python?", "List five fruits.", "Explain rain."]

    def ask(q: str) -> str:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": q}],
            temperature=0,
            max_tokens=48,
            stream=True,
            # NOTE: a step a token, to count shared steps; each computed, not remembered
            extra_body={"speculation": "off", "answer_memory": False},
        )
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    alone = [ask(q) for q in questions]
    steps = server.metric("reame_engine_step_sequences_count")
    single = server.metric("reame_engine_step_sequences_bucket", 'le="1.0"')
    together: dict[int, str] = {}
    threads = [
        threading.Thread(target=lambda i=i: together.update({i: ask(questions[i])}))
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared = (server.metric("reame_engine_step_sequences_count") - steps) - (
        server.metric("reame_engine_step_sequences_bucket", 'le="1.0"') - single
    )
    assert shared > 10  # steps that held more than one sequence
    assert [together[i] for i in range(4)] == alone


def test_a_client_that_drops_the_stream_frees_its_sequence(server: ServerProcess) -> None:
    body = {
        "model": MODEL,
        "messages": COLORS,
        "max_tokens": 1000,
        "ignore_eos": True,
        "stream": True,
    }
    with httpx.stream(
        "POST",
        f"{server.url}/v1/chat/completions",
        json=body,
        timeout=60,
        headers={"authorization": f"Bearer {KEY}"},
    ) as r:
        lines = r.iter_lines()
        for _ in range(6):
            next(lines)
        assert server.metric("reame_running_sequences") == 1
    dropped = time.monotonic()
    while server.metric("reame_running_sequences") != 0 and time.monotonic() - dropped < 1.0:
        time.sleep(0.05)
    assert server.metric("reame_running_sequences") == 0
    assert time.monotonic() - dropped < 1.0


def test_a_session_computes_only_the_new_turn(client: OpenAI, server: ServerProcess) -> None:
    first = client.chat.completions.create(
        model=MODEL, messages=COLORS, temperature=0, max_tokens=20, extra_body={"session_id": "s-1"}
    )
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    history = [
        *COLORS,
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And three animals?"},
    ]
    second = client.chat.completions.create(
        model=MODEL,
        messages=history,
        temperature=0,
        max_tokens=20,
        extra_body={"session_id": "s-1"},
    )
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached >= first.usage.prompt_tokens
    fresh = client.chat.completions.create(
        model=MODEL, messages=history, temperature=0, max_tokens=20
    )
    assert second.choices[0].message.content == fresh.choices[0].message.content
    listed = raw(server, "GET", "/v1/sessions").json()["data"]
    assert [s["id"] for s in listed] == ["s-1"]
    one = raw(server, "GET", "/v1/sessions/s-1").json()
    assert one["turns"] == 2 and one["cached_tokens"] > cached and one["bytes"] > 0
    assert raw(server, "DELETE", "/v1/sessions/s-1").json()["deleted"] is True
    assert_openai_error(raw(server, "GET", "/v1/sessions/s-1"), 404, "No session")


def test_the_session_header_works_too(client: OpenAI, server: ServerProcess) -> None:
    headers = {"X-Reame-Session": "s-2"}
    client.chat.completions.create(
        model=MODEL, messages=COLORS, temperature=0, max_tokens=8, extra_headers=headers
    )
    again = client.chat.completions.create(
        model=MODEL,
        messages=COLORS,
        temperature=0,
        max_tokens=8,
        extra_headers=headers,
        extra_body={"answer_memory": False},  # NOTE: computed on the session's state
    )
    # NOTE: all of it: the session's slot holds this very prompt and the logits its last token
    # gave (the same prompt again computes nothing, engine/reuse_index.py)
    assert again.usage.prompt_tokens_details.cached_tokens == again.usage.prompt_tokens
    raw(server, "DELETE", "/v1/sessions/s-2")


def one_slot_server(context_length: int, env: dict[str, str]) -> ServerProcess:
    """A second, small server for the tests that need their own settings."""
    return ServerProcess(
        "--threads", "2", "--parallel", "1", "--context-length", str(context_length), env=env
    )


def test_a_full_queue_is_a_429_with_retry_after_and_sigterm_drains() -> None:
    # NOTE: a drain window long enough for 200 tokens on a loaded machine; the window is not
    # what is tested, the drain is
    srv = one_slot_server(512, {"REAME_MAX_WAITING": "0", "REAME_DRAIN_SECONDS": "180"})
    try:
        body = {
            "model": MODEL,
            "messages": COLORS,
            "max_tokens": 200,
            "ignore_eos": True,
            "stream": True,
            "temperature": 0,
        }
        with httpx.stream("POST", f"{srv.url}/v1/chat/completions", json=body, timeout=60) as r:
            lines = r.iter_lines()
            next(lines)
            busy = httpx.post(
                f"{srv.url}/v1/chat/completions", json={**body, "stream": False}, timeout=30
            )
            assert_openai_error(busy, 429, "retry")
            assert busy.headers["retry-after"] == "1"
            streamed = httpx.post(f"{srv.url}/v1/chat/completions", json=body, timeout=30)
            assert_openai_error(streamed, 429, "retry")
            srv.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 10
            while (ready := httpx.get(f"{srv.url}/ready", timeout=10)).status_code == 200:
                assert time.monotonic() < deadline, "/ready stayed 200 while draining"
                time.sleep(0.05)
            assert_openai_error(ready, 503, "shutting down")  # out of a proxy's rotation
            assert httpx.get(f"{srv.url}/health", timeout=10).status_code == 200  # still alive
            rest = [line for line in lines if line]
        assert rest[-1] == "data: [DONE]"  # the stream in flight was drained, not cut
        assert srv.proc.wait(timeout=200) == 0
    finally:
        srv.stop()


def test_a_stream_gathers_its_tokens_between_writes_and_loses_none() -> None:
    srv = one_slot_server(512, {"REAME_STREAM_INTERVAL_MS": "200"})
    try:
        client = OpenAI(base_url=f"{srv.url}/v1", api_key="none", max_retries=0)
        ask = {"model": MODEL, "messages": COLORS, "temperature": 0, "max_tokens": 40}
        ask["extra_body"] = {"ignore_eos": True}
        # NOTE: streamed first: the same prompt again goes on from the KV its sequence kept,
        # and its first tokens may come before the stream's response is open to write them
        stream = list(
            client.chat.completions.create(
                **ask, stream=True, logprobs=True, stream_options={"include_usage": True}
            )
        )
        whole = client.chat.completions.create(**ask).choices[0].message.content
        chunks = [c for c in stream if c.choices and c.choices[0].logprobs]
        per_chunk = [len(c.choices[0].logprobs.content) for c in chunks]
        assert per_chunk[0] == 1  # the first token goes out at once
        assert max(per_chunk) > 1  # then a write carries several
        assert sum(per_chunk) == stream[-1].usage.completion_tokens == 40  # none is lost
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == whole
    finally:
        srv.stop()


def test_bench_measures_a_server_over_http(server: ServerProcess) -> None:
    import subprocess
    import sys
    from pathlib import Path

    env = {"PYTHONPATH": str(Path(__file__).parents[1] / "app"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reame.cli.main",
            "bench",
            "--url",
            server.url,
            "--name",
            "reame",
            "--api-key",
            KEY,
            "--runs",
            "1",
            "--max-tokens",
            "6",
            "--prompt-tokens",
            "32",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["targets"] == ["reame"]
    assert isinstance(report["prompt_seed"], int)  # a new one each time, to send it again
    rows = report["figures"]
    for key in ("time to first token s", "aggregate decode tok/s x1", "aggregate decode tok/s x4"):
        assert rows[key]["reame"] > 0
    assert all(report["checks"].values()), report["checks"]


def test_keys_from_a_file_and_the_environment_can_guard_metrics(tmp_path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text("# rotated monthly\nfrom-file\n")
    srv = one_slot_server(
        256,
        {
            "REAME_API_KEY_FILE": str(key_file),
            "REAME_API_KEYS": "from-env",
            "REAME_METRICS_AUTH": "true",
        },
    )
    try:
        for key in ("from-file", "from-env"):
            r = httpx.get(f"{srv.url}/v1/models", headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200
        assert_openai_error(httpx.get(f"{srv.url}/metrics"), 401, "API key")
        ok = httpx.get(f"{srv.url}/metrics", headers={"authorization": "Bearer from-env"})
        assert ok.status_code == 200 and "reame_requests_total" in ok.text
        assert httpx.get(f"{srv.url}/health").status_code == 200
    finally:
        srv.stop()
    logs = "\n".join(srv.log_lines())
    assert "from-file" not in logs and "from-env" not in logs  # keys are never logged
