"""The answer memory on a real server (SmolLM2): a repeated greedy or seeded request is answered
from memory, streamed or not, with the same text, the first answer's usage (its prompt all
cached) and the X-Reame-Memory header; anything that shapes the answer changed is a miss; an
unseeded sampled answer, or one cut by an abort, is never kept; one cut by max_tokens is kept as
what it is; another key misses under per-key tenancy; a corrupted entry is a miss. (Steps shared
with other sequences: test_answer_memory_engine.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server_process import ServerProcess, small_server

MODEL = "smollm2-135m"
KEYS = ("key-one-for-memory", "key-two-for-memory")
ASK = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Name three colors."}],
    "temperature": 0,
    "max_tokens": 40,
}


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(context_length=1024)  # NOTE: the bench's document and its answer
    yield srv
    srv.stop()


def post(srv: ServerProcess, body: dict, key: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(f"{srv.url}/v1/chat/completions", json=body, headers=headers, timeout=120)
    assert r.status_code == 200, r.text
    return r


def streamed(srv: ServerProcess, body: dict) -> tuple[str, str | None, dict | None]:
    """The text a stream writes, its memory header, and its usage chunk."""
    parts, usage = [], None
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{srv.url}/v1/chat/completions", json=body, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
                for choice in chunk["choices"]:
                    parts.append(choice["delta"].get("content") or "")
        return "".join(parts), r.headers.get("x-reame-memory"), usage


def idle(srv: ServerProcess) -> None:
    deadline = time.monotonic() + 30
    while srv.metric("reame_running_sequences") and time.monotonic() < deadline:
        time.sleep(0.05)


def text(r: httpx.Response) -> str:
    return r.json()["choices"][0]["message"]["content"]


def writes(srv: ServerProcess, result: str, at_least: float = 0.0) -> float:
    """The memory's writes by result (kept in the background: waits until `at_least`)."""
    deadline = time.monotonic() + 10
    while True:
        found = srv.metric("reame_answer_memory_writes_total", f'result="{result}"')
        if found >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_repeated_greedy_request_is_answered_from_memory_streamed_and_not(
    server: ServerProcess,
) -> None:
    first = post(server, ASK)
    assert first.headers.get("x-reame-memory") is None
    again = post(server, ASK)
    assert again.headers.get("x-reame-memory") == "hit"
    assert text(again) == text(first)
    usage, was = again.json()["usage"], first.json()["usage"]
    assert usage["prompt_tokens"] == was["prompt_tokens"]
    assert usage["completion_tokens"] == was["completion_tokens"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == was["prompt_tokens"]
    words, header, chunk_usage = streamed(server, ASK)
    assert (words, header) == (text(first), "hit")
    assert chunk_usage is not None and chunk_usage["completion_tokens"] == was["completion_tokens"]


def test_a_repeated_seeded_request_is_answered_from_memory(server: ServerProcess) -> None:
    fact = [{"role": "user", "content": "Tell me a fact."}]
    ask = {**ASK, "temperature": 0.9, "seed": 11, "messages": fact}
    words, header, _ = streamed(server, ask)  # computed streamed, then answered whole
    assert header is None
    again = post(server, ask)
    assert again.headers.get("x-reame-memory") == "hit" and text(again) == words
    other = post(server, {**ask, "seed": 12})
    assert other.headers.get("x-reame-memory") is None


@pytest.mark.parametrize(
    "change",
    [
        {"max_tokens": 39},
        {"stop": ["Blue"]},
        {"temperature": 0.0, "seed": 3},
        {"presence_penalty": 0.5},
        {"logit_bias": {"330": 5}},
        {"messages": [{"role": "system", "content": "Be brief."}, *ASK["messages"]]},
        {"response_format": {"type": "json_object"}},
        {"n": 2},
    ],
)
def test_anything_that_shapes_the_answer_changed_is_a_miss(
    server: ServerProcess, change: dict
) -> None:
    post(server, ASK)
    assert post(server, ASK).headers.get("x-reame-memory") == "hit"
    assert post(server, {**ASK, **change}).headers.get("x-reame-memory") is None


def test_an_unseeded_sampled_answer_is_never_kept(server: ServerProcess) -> None:
    ask = {**ASK, "temperature": 0.8, "messages": [{"role": "user", "content": "A word?"}]}
    kept = writes(server, "kept")
    post(server, ask)
    post(server, {**ask, "temperature": 0})  # greedy: kept, after the sampled one ended
    assert writes(server, "kept", kept + 1) == kept + 1
    assert post(server, ask).headers.get("x-reame-memory") is None


def test_an_answer_cut_by_max_tokens_is_kept_as_what_it_is(server: ServerProcess) -> None:
    ask = {**ASK, "max_tokens": 3, "messages": [{"role": "user", "content": "Count to ten."}]}
    first = post(server, ask)
    assert first.json()["choices"][0]["finish_reason"] == "length"
    again = post(server, ask)
    assert again.headers.get("x-reame-memory") == "hit"
    assert again.json()["choices"][0]["finish_reason"] == "length"
    assert text(again) == text(first)


def test_an_aborted_answer_is_never_kept(server: ServerProcess) -> None:
    ask = {**ASK, "max_tokens": 200, "ignore_eos": True, "stream": True,
           "messages": [{"role": "user", "content": "Write a long story."}]}  # fmt: skip
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=ask, timeout=60) as r:
        for line in r.iter_lines():
            if '"content"' in line and '"content":""' not in line:
                break  # the client goes away after its first word
    idle(server)  # NOTE: the next one computed alone, not beside the one being stopped
    failed, kept = writes(server, "failed"), writes(server, "kept")
    again = post(server, {**ask, "stream": False})  # computed whole this time, and kept
    assert again.headers.get("x-reame-memory") is None
    assert again.json()["usage"]["completion_tokens"] == 200
    assert writes(server, "kept", kept + 1) == kept + 1 and writes(server, "failed") == failed


def test_a_corrupted_entry_is_a_miss(server: ServerProcess) -> None:
    ask = {**ASK, "messages": [{"role": "user", "content": "Name a fruit."}]}
    kept = writes(server, "kept")
    first = post(server, ask)
    writes(server, "kept", kept + 1)  # NOTE: written in the background after the answer
    kept_files = Path(server.state_dir, "answers").rglob("*.json")
    paths = sorted(kept_files, key=lambda p: p.stat().st_mtime)
    record = json.loads(paths[-1].read_bytes())
    assert record["choices"][0][0][1]  # the newest entry: its first token's text
    record["choices"][0][0][1] = "Wrong"
    paths[-1].write_text(json.dumps(record))
    again = post(server, ask)
    assert again.headers.get("x-reame-memory") is None  # a miss: computed again
    assert text(again) == text(first)


def test_under_per_key_tenancy_another_key_misses() -> None:
    srv = small_server("--api-key", KEYS[0], "--api-key", KEYS[1])
    try:
        post(srv, ASK, KEYS[0])
        assert post(srv, ASK, KEYS[1]).headers.get("x-reame-memory") is None
        assert post(srv, ASK, KEYS[0]).headers.get("x-reame-memory") == "hit"
        assert post(srv, ASK, KEYS[1]).headers.get("x-reame-memory") == "hit"  # its own now
    finally:
        srv.stop()


def test_the_memory_can_be_turned_off() -> None:
    srv = small_server(env={"REAME_ANSWER_MEMORY": "false"})
    try:
        post(srv, ASK)
        assert post(srv, ASK).headers.get("x-reame-memory") is None
        assert not Path(srv.state_dir, "answers").exists()
    finally:
        srv.stop()


def test_a_hit_in_a_session_leaves_the_conversation_as_if_computed(
    server: ServerProcess,
) -> None:
    """Turn 1 answered from memory in one session, computed in another: turn 2 is the same."""
    question = [{"role": "user", "content": "Name a large animal."}]
    later = {"role": "user", "content": "Where does it live?"}
    turns = {}
    for session, hits in (("mem-a", True), ("mem-b", False)):
        first = post(server, {**ASK, "messages": question, "session_id": session})
        if hits:
            again = post(server, {**ASK, "messages": question, "session_id": session})
            assert again.headers.get("x-reame-memory") == "hit"
        answer = {"role": "assistant", "content": text(first)}
        follow = {**ASK, "messages": [*question, answer, later], "session_id": session}
        turns[session] = post(server, follow)
    assert turns["mem-a"].headers.get("x-reame-memory") is None
    assert text(turns["mem-a"]) == text(turns["mem-b"])


def test_a_responses_chain_goes_on_from_a_call_answered_from_memory(
    server: ServerProcess,
) -> None:
    def respond(**body: object) -> dict:
        body = {"model": MODEL, "temperature": 0, "max_output_tokens": 24, **body}
        r = httpx.post(f"{server.url}/v1/responses", json=body, timeout=120)
        assert r.status_code == 200, r.text
        said = [c["text"] for item in r.json()["output"] if item["type"] == "message"
                for c in item["content"]]  # fmt: skip
        return r.json() | {"output_text": "".join(said), "memory": r.headers.get("x-reame-memory")}

    first = respond(input="Name a river.")
    second = respond(input="How long is it?", previous_response_id=first["id"])
    again = respond(input="How long is it?", previous_response_id=first["id"])
    assert again["memory"] == "hit" and again["id"] != second["id"]
    assert again["output_text"] == second["output_text"]
    third = respond(input="Which sea does it reach?", previous_response_id=again["id"])
    other = respond(input="Which sea does it reach?", previous_response_id=second["id"])
    assert third["output_text"] and third["output_text"] == other["output_text"]


def test_reame_bench_again_times_a_request_sent_again(server: ServerProcess) -> None:
    """`reame bench --again` against this server: each request first, then again, whole and
    streamed; the report says both times and their ratio (the figures: docs/benchmarks)."""
    hits = server.metric("reame_answer_memory_lookups_total", 'result="hit"')
    done = subprocess.run(
        [sys.executable, "-m", "reame.cli.main", "bench", "--again", "1", "--again-runs", "2",
         "--url", server.url, "--name", "reame"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [
        line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| reame")
    ]
    assert [r[1].strip() for r in rows] == ["whole", "streamed"]
    for _, _, first, again, ratio in rows:
        assert float(ratio) == pytest.approx(float(again) / float(first), abs=0.002)
    # each request sent again was answered from memory
    assert server.metric("reame_answer_memory_lookups_total", 'result="hit"') == hits + 4


def test_a_conclave_is_kept_only_when_every_candidate_is_seeded(server: ServerProcess) -> None:
    """Candidates after the first explore: unseeded they sample at random, and the vote is not
    kept; with a seed each has its own, and the whole vote comes back from memory."""
    # NOTE: no drafts: two candidates' verify runs of one size in one decode are not exact
    # (answer-memory.md), and would keep this vote out whatever its seeds
    ask = {**ASK, "best_of": 3, "max_tokens": 16, "speculation": "off",
           "messages": [{"role": "user", "content": "What is 17+25?"}]}  # fmt: skip
    post(server, ask)
    assert post(server, ask).headers.get("x-reame-memory") is None
    seeded = {**ask, "seed": 5}
    first = post(server, seeded)
    again = post(server, seeded)
    assert again.headers.get("x-reame-memory") == "hit"
    assert again.json()["conclave"] == first.json()["conclave"]
    assert again.headers.get("x-reame-conclave") == first.headers.get("x-reame-conclave")
    assert text(again) == text(first)
