"""The Conclave on the real SmolLM2-135M-Instruct: in the engine, over HTTP with the openai
client, and from `reame run`."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from conftest import small_settings
from reame import metrics
from reame.conclave.answers import extract
from reame.conclave.convene import convene
from reame.engine.request import GenerationRequest
from reame.runtime import Runtime
from reame.service import Job
from server_process import ServerProcess
from step_sizes import steps_with_more_than
from test_cli import assert_one_line_error, reame

pytestmark = pytest.mark.model

MODEL = "smollm2-135m"
SUM = "What is 7 + 5? Reply with just the number."
CATS = "Say something about cats."
EVERY_TEXT_HAS_AN_E = re.compile("(e)")  # an answer every candidate gives: a majority forms


@pytest.fixture(scope="module")
def runtime(smollm2_path: Path) -> Iterator[Runtime]:
    with Runtime(small_settings(smollm2_path, prefix_cache=False)) as rt:
        yield rt


def chat(runtime: Runtime, content: str) -> list[int]:
    return runtime.service.chat.prompt([{"role": "user", "content": content}])


def convened(runtime: Runtime, job: Job, n: int, rule, early_stop: bool):
    return asyncio.run(convene(runtime.service, job, n, rule, early_stop))


def counter(metric) -> float:
    return metric._value.get()


def test_candidates_share_one_prefill_and_write_what_their_seeds_write_alone(
    runtime: Runtime,
) -> None:
    prompt = chat(runtime, SUM)
    params = runtime.service.sampling(temperature=0.7, seed=123, max_tokens=40)
    computed = counter(metrics.PROMPT_TOKENS_COMPUTED)
    verdict = convened(runtime, Job(prompt, params), 5, "number", early_stop=False)
    assert counter(metrics.PROMPT_TOKENS_COMPUTED) - computed == len(prompt)
    alone = [
        runtime.service.generate(prompt, params.model_copy(update={"seed": 123 + k}))[1]
        for k in range(5)
    ]
    assert [c.text for c in verdict.candidates] == alone
    assert len(set(alone)) > 1  # sampled: the candidates differ
    answers = [extract(text, "number") for text in alone]
    voted = [a for a in answers if a is not None]
    assert verdict.tally.winner()[0] == max(
        voted, key=lambda a: (voted.count(a), -answers.index(a))
    )
    assert verdict.tally.num_in == 5 and not verdict.tally.stopped
    assert [c.finish.num_cached_tokens for c in verdict.candidates[1:]] == [len(prompt)] * 4


def test_a_greedy_conclave_explores_beside_its_greedy_anchor(runtime: Runtime) -> None:
    """Candidate 0 writes the plain greedy answer; candidate k what a single request with seed
    + k at the exploring temperature writes. Before, every candidate of a greedy Conclave wrote
    the greedy answer (stop 45: candidate_jobs only shifted the seed)."""
    prompt = chat(runtime, CATS)
    params = runtime.service.sampling(temperature=0.0, seed=40, max_tokens=24)
    verdict = asyncio.run(
        convene(runtime.service, Job(prompt, params), 3, "line", False, explore=0.7)
    )
    greedy = runtime.service.generate(prompt, params)[1]
    warm = [
        runtime.service.generate(
            prompt, params.model_copy(update={"seed": 40 + k, "temperature": 0.7})
        )[1]
        for k in (1, 2)
    ]
    assert [c.text for c in verdict.candidates] == [greedy, *warm]
    assert len({greedy, *warm}) > 1  # explored: not three copies of one answer
    assert verdict.tally.agreement() == f"{max(map(len, verdict.tally.votes.values()))}/3"


def test_the_early_stop_stops_the_stragglers_and_frees_their_sequences(runtime: Runtime) -> None:
    prompt = chat(runtime, CATS)
    params = runtime.service.sampling(temperature=0.9, seed=7, max_tokens=120)
    stopped_before = counter(metrics.CONCLAVE_STOPPED)
    verdict = convened(runtime, Job(prompt, params), 5, EVERY_TEXT_HAS_AN_E, early_stop=True)
    tally = verdict.tally
    assert tally.majority() == "e"
    assert tally.stopped, "the answers came in at different lengths: some were still running"
    assert all(verdict.candidates[k].finish is None for k in tally.stopped)
    assert counter(metrics.CONCLAVE_STOPPED) - stopped_before == len(tally.stopped)
    whole = convened(runtime, Job(prompt, params), 5, EVERY_TEXT_HAS_AN_E, early_stop=False)
    assert verdict.num_completion_tokens < whole.num_completion_tokens
    # NOTE: candidate k writes the same text in both runs (seed + k): let go on, the stopped
    # ones write more than they had (not "longer than the longest finished one": on an AVX-512
    # CPU one finished at max_tokens before the majority held)
    had = sum(len(verdict.candidates[k].tokens) for k in tally.stopped)
    assert sum(whole.candidates[k].finish.num_completion_tokens for k in tally.stopped) > had
    deadline = time.monotonic() + 5
    while runtime.engine.num_running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runtime.engine.num_running == 0


def test_one_candidate_is_a_plain_request_with_a_tally(runtime: Runtime) -> None:
    prompt = chat(runtime, SUM)
    params = runtime.service.sampling(temperature=0.0, max_tokens=16)
    verdict = convened(runtime, Job(prompt, params), 1, "number", early_stop=True)
    text = runtime.service.generate(prompt, params)[1]
    assert verdict.winner.text == text
    assert verdict.summary()["n"] == 1
    assert verdict.tally.num_in == 1


def test_a_group_larger_than_the_sequences_computes_its_prompt_once(smollm2_path: Path) -> None:
    """Seven candidates on two sequences: five wait, then start from the prompt's saved state
    and logits; each writes what its seed writes alone."""
    with Runtime(small_settings(smollm2_path, prefix_cache=False, parallel=2)) as small:
        prompt = chat(small, CATS)
        params = small.service.sampling(temperature=0.8, seed=40, max_tokens=24)
        computed = counter(metrics.PROMPT_TOKENS_COMPUTED)
        wide = steps_with_more_than(2)
        verdict = convened(small, Job(prompt, params), 7, "line", early_stop=False)
        assert counter(metrics.PROMPT_TOKENS_COMPUTED) - computed == len(prompt)
        alone = [
            small.service.generate(prompt, params.model_copy(update={"seed": 40 + k}))[1]
            for k in range(7)
        ]
        assert [c.text for c in verdict.candidates] == alone
        assert verdict.tally.num_in == 7
        assert steps_with_more_than(2) == wide


def test_an_aborted_waiting_candidate_frees_its_place(smollm2_path: Path) -> None:
    with Runtime(small_settings(smollm2_path, prefix_cache=False, parallel=2)) as small:
        prompt = chat(small, CATS)
        events: dict[int, list] = {k: [] for k in range(4)}
        requests = [
            GenerationRequest(prompt, small.service.sampling(seed=k, max_tokens=40))
            for k in range(4)
        ]
        small.engine.submit_group(requests, [events[k].append for k in range(4)])
        small.engine.abort(requests[3].request_id)
        deadline = time.monotonic() + 60
        while not all(e and e[-1].__class__.__name__ == "FinishEvent" for e in events.values()):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert events[3][-1].reason == "abort"
        assert all(events[k][-1].reason in ("stop", "length") for k in range(3))
        assert small.engine.num_free_places == small.engine._max_in_flight  # all given back


# -- over HTTP ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = ServerProcess(
        "--threads", "2", "--parallel", "5", "--context-length", "1024",
        env={"REAME_MAX_BEST_OF": "4"},
    )  # fmt: skip
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0)


def post(server: ServerProcess, path: str, body: dict, timeout: float = 60) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json={"model": MODEL, **body}, timeout=timeout)


def test_a_chat_conclave_answers_with_its_tally_and_computes_the_prompt_once(
    client: OpenAI, server: ServerProcess
) -> None:
    computed = server.metric("reame_prompt_tokens_computed_total")
    conclaves = server.metric("reame_conclaves_total")
    messages = [{"role": "user", "content": "What is 9 - 4? Reply with just the number."}]
    response = client.chat.completions.create(
        model=MODEL,
        messages=messages,
        temperature=0.7,
        seed=5,
        max_tokens=40,
        extra_body={"best_of": 4, "vote_on": "number"},
    )
    conclave = response.model_extra["conclave"]
    assert conclave["n"] == 4
    assert sum(conclave["tally"].values()) + conclave["abstained"] + conclave["stopped_early"] == 4
    content = response.choices[0].message.content
    if conclave["answer"] is not None:
        assert extract(content, "number") == conclave["answer"]
    usage = response.usage
    assert server.metric("reame_prompt_tokens_computed_total") - computed == (
        usage.prompt_tokens - usage.prompt_tokens_details.cached_tokens
    )
    assert server.metric("reame_conclaves_total") - conclaves == 1
    # the same as four separate choices: each computes the prompt (a new one, nothing reused)
    computed = server.metric("reame_prompt_tokens_computed_total")
    other = [{"role": "user", "content": "What is 8 - 3? Reply with just the number."}]
    plain = client.chat.completions.create(model=MODEL, messages=other, n=4, max_tokens=4)
    assert server.metric("reame_prompt_tokens_computed_total") - computed == (
        4 * plain.usage.prompt_tokens
    )


def test_a_streamed_conclave_sends_the_winner_in_one_delta(client: OpenAI) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": SUM}],
        "temperature": 0.7,
        "seed": 11,
        "max_tokens": 30,
        "extra_body": {"best_of": 3},
    }
    whole = client.chat.completions.create(**body)
    chunks = list(client.chat.completions.create(**body, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_a_conclave_says_its_agreement_in_a_header(client: OpenAI) -> None:
    made = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": SUM}],
        temperature=0.0,
        seed=2,
        max_tokens=30,
        extra_body={"best_of": 3, "vote_on": "number", "vote_early_stop": False},
    )
    conclave = made.parse().model_extra["conclave"]
    agreed = conclave["tally"].get(conclave["answer"], 0) if conclave["answer"] else 0
    assert made.headers["X-Reame-Conclave"] == f"{agreed}/3"
    plain = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": SUM}], max_tokens=4
    )
    assert "X-Reame-Conclave" not in plain.headers


def test_completions_take_openai_best_of(client: OpenAI) -> None:
    response = client.completions.create(
        model=MODEL, prompt="7 + 5 =", best_of=3, temperature=0.7, seed=3, max_tokens=8
    )
    assert response.model_extra["conclave"]["n"] == 3
    assert len(response.choices) == 1
    assert response.usage.completion_tokens >= len(response.choices[0].text) // 8


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"best_of": 5}, "best_of is 5, above this server's limit of 4 (max_best_of)"),
        ({"best_of": 3, "n": 2}, "n must be 1 with best_of"),
        ({"best_of": 3, "vote_on": "(unclosed"}, "vote_on: not a rule"),
        ({"best_of": 3, "session_id": "s"}, "best_of cannot be used with a session"),
        ({"best_of": 0}, "best_of"),
    ],
)
def test_a_conclave_it_cannot_run_is_a_400_that_says_why(
    server: ServerProcess, body: dict, needle: str
) -> None:
    r = post(
        server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], **body}
    )
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"]


def test_a_prompt_list_cannot_be_one_conclave(server: ServerProcess) -> None:
    r = post(server, "/v1/completions", {"prompt": ["a", "b"], "best_of": 2})
    assert r.status_code == 400
    assert "best_of takes one prompt" in r.json()["error"]["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_stops_every_candidate(server: ServerProcess, stream: bool) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": CATS}],
        "max_tokens": 900,
        "ignore_eos": True,
        "best_of": 4,
        "stream": stream,
    }
    payload = json.dumps(body).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as conn:
        conn.sendall(head + payload)
        deadline = time.monotonic() + 60
        while server.metric("reame_running_sequences") != 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.metric("reame_running_sequences") == 4  # all four are writing
    left = time.monotonic()  # NOTE: 900 tokens each are many seconds away
    while server.metric("reame_running_sequences") != 0 and time.monotonic() - left < 2.0:
        time.sleep(0.05)
    assert server.metric("reame_running_sequences") == 0


def test_run_prints_the_winner_and_the_tally() -> None:
    out = reame(
        "run", MODEL, "--prompt", SUM, "--best-of", "3", "--vote-on", "number",
        "--temperature", "0.7", "--seed", "1", "--max-tokens", "30",
        "--threads", "2", "--context-length", "512",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
    assert re.search(r"\(conclave of 3: .*stopped early\)", out.stderr)


def test_run_serves_a_conclave_larger_than_its_sequences() -> None:
    out = reame(
        "run", MODEL, "--prompt", SUM, "--best-of", "3", "--parallel", "2", "--vote-on", "number",
        "--temperature", "0.7", "--seed", "1", "--max-tokens", "30", "--threads", "2",
        "--context-length", "512",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert re.search(r"\(conclave of 3: ", out.stderr)


def test_serve_refuses_a_default_conclave_above_max_best_of(tmp_path: Path) -> None:
    conf = tmp_path / "reame.conf"
    conf.write_text("best_of = 5\nmax_best_of = 4\n")
    out = reame("serve", MODEL, "--config", str(conf), "--parallel", "2", "--port", "1")
    assert_one_line_error(out, "best_of is 5", "at most 4 candidates")


def test_best_of_5_on_a_server_of_4_sequences_answers() -> None:
    srv = ServerProcess("--threads", "2", "--parallel", "4", "--context-length", "1024")
    try:
        body = {
            "messages": [{"role": "user", "content": SUM}],
            "best_of": 5,
            "vote_on": "number",
            "temperature": 0.7,
            "seed": 3,
            "max_tokens": 30,
        }
        r = post(srv, "/v1/chat/completions", body, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["conclave"]["n"] == 5
    finally:
        srv.stop()
