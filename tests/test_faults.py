"""SIGKILL of a real `reame serve` (during a snapshot write, during Palimpsest appends, in the
middle of 4 streams), then a restart on the same state dir: every answer is the one a cold
server on an empty state dir gives, `reame cache verify` finds no bad file, and the cache and
the archive still work. What each fault left on disk is printed at the end."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fault_server import (
    MODEL,
    ask,
    cache_verify,
    disk_state,
    kill,
    kvs_files,
    pal_summary,
    palimpsest_stats,
    part_files,
    serve,
    wait_for,
)
from reame_bench.workloads import filler_text

pytestmark = pytest.mark.model

LONG = 600  # words of a system prompt: ~650 tokens, snapshots of 8-15 MB
LONG_TOKENS = 16
STREAM_TOKENS = 64
NOTES: list[str] = []


def chat(system: str, question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


LONG_PROMPTS = [chat(filler_text(seed=40 + i, num_words=LONG), "Sum it up.") for i in range(2)]
STREAM_PROMPTS = [
    chat(filler_text(seed=50 + i, num_words=120), "Write a long story about it.") for i in range(4)
]
# asked after each restart: a new snapshot is written and hit, a new record archived
FRESH_PROMPTS = [chat(filler_text(seed=60 + i, num_words=150), "Name a colour.") for i in range(3)]


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every prompt's greedy answer from a cold server on an empty state dir, one at a time."""
    server = serve(tmp_path_factory.mktemp("cold-state"))
    out = {}
    try:
        for key, messages, max_tokens in all_prompts():
            text, cached = ask(server, messages, max_tokens)
            assert cached == 0  # nothing shared between the prompts: each is computed cold
            out[key] = text
    finally:
        server.stop()
    return out


def all_prompts() -> Iterator[tuple[str, list[dict[str, str]], int]]:
    for i, m in enumerate(LONG_PROMPTS):
        yield f"long{i}", m, LONG_TOKENS
    for i, m in enumerate(STREAM_PROMPTS):
        yield f"stream{i}", m, STREAM_TOKENS
    for i, m in enumerate(FRESH_PROMPTS):
        yield f"fresh{i}", m, LONG_TOKENS


@pytest.fixture(scope="module", autouse=True)
def closing_note(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    lines = ["", "faults: what each left on disk and what was served after", *NOTES]
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n".join(lines), flush=True)


def note(line: str) -> None:
    NOTES.append(line)


def check_still_works(server, state_dir: Path, cold: dict[str, str], key: str, label: str) -> None:
    """A new prompt: the cold answer, a new snapshot on disk, a hit on it, a new record."""
    index = int(key.removeprefix("fresh"))
    before_kvs, before = set(kvs_files(state_dir)), pal_summary(state_dir)["records"]
    text, cached = ask(server, FRESH_PROMPTS[index], LONG_TOKENS)
    assert (text, cached) == (cold[key], 0)
    assert pal_summary(state_dir)["records"] > before  # archived as it finished
    assert wait_for(lambda: set(kvs_files(state_dir)) - before_kvs, 30, 0.1), "no new snapshot"
    text, cached = ask(server, FRESH_PROMPTS[index], LONG_TOKENS)
    assert text == cold[key] and cached > 0
    note(f"  {label}: a new snapshot written and hit ({cached} tokens), a new record archived")


def test_a_kill_during_snapshot_writes(tmp_path: Path, cold: dict[str, str]) -> None:
    rng = random.Random(15)
    # the first .part seen, then at once; then, once a snapshot of this prompt is whole on
    # disk, a little later, while the writer goes on with the next ones (a kill at a fixed delay
    # alone lands before or after the first rename as the machine's speed has it)
    delays = [0.0, rng.uniform(0.05, 0.3)]
    for i, delay in enumerate(delays):
        before = set(kvs_files(tmp_path))
        server = serve(tmp_path)
        text, cached = ask(server, LONG_PROMPTS[i], LONG_TOKENS)
        assert (text, cached) == (cold[f"long{i}"], 0)
        seen = wait_for(lambda: bool(part_files(tmp_path)), 30)
        if i == len(delays) - 1:
            assert wait_for(lambda b=before: bool(set(kvs_files(tmp_path)) - b), 60, 0.01)
        time.sleep(delay)
        parts_at_kill = len(part_files(tmp_path))
        kill(server)
        state = disk_state(tmp_path)
        after = "a temp file" if i < len(delays) - 1 else "a whole snapshot and a temp file"
        note(
            f"(a) kill {i + 1}: {delay * 1000:.0f} ms after {after} "
            f"{'appeared' if seen else 'did not appear (30 s)'}, {parts_at_kill} temp file(s) "
            f"being written; left {state}; verify: {cache_verify(tmp_path)}"
        )
    server = serve(tmp_path)
    try:
        served = []
        for i, messages in enumerate(LONG_PROMPTS):
            text, cached = ask(server, messages, LONG_TOKENS)
            assert text == cold[f"long{i}"]
            served.append(cached)
        assert any(served), "no snapshot survived any kill"
        note(f"  (a) after the restart: both answers cold-identical, cached_tokens {served}")
        check_still_works(server, tmp_path, cold, "fresh0", "(a)")
    finally:
        server.stop()
    note(f"  (a) verify after: {cache_verify(tmp_path)}")


def load(server, stop: threading.Event, errors: list[BaseException]) -> None:
    """Short answers one after another, each archived as it finishes."""
    rng = random.Random(threading.get_native_id())
    while not stop.is_set():
        question = f"Count to {rng.randrange(5, 40)}."
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": question}],
            "temperature": 0,
            "max_tokens": rng.randrange(8, 48),
        }
        try:
            httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120)
        except Exception as exc:  # the kill
            errors.append(exc)
            return


def test_a_kill_during_palimpsest_appends(tmp_path: Path, cold: dict[str, str]) -> None:
    server = serve(tmp_path)
    stop, errors = threading.Event(), []
    clients = [threading.Thread(target=load, args=(server, stop, errors)) for _ in range(4)]
    for c in clients:
        c.start()
    assert wait_for(lambda: pal_summary(tmp_path)["records"] >= 8, 180, 0.01), (
        pal_summary(tmp_path),
        errors,
    )
    time.sleep(random.Random(16).uniform(0.1, 1.0))
    kill(server)
    stop.set()
    for c in clients:
        c.join(60)
    state = disk_state(tmp_path)
    note(f"(b) kill amid 4 clients' appends: left {state}; verify: {cache_verify(tmp_path)}")
    assert state["damaged"] == 0 and state["set_aside"] == 0
    server = serve(tmp_path)
    try:
        stats = palimpsest_stats(tmp_path)
        assert "damaged 0, set aside 0" in stats
        text, cached = ask(server, LONG_PROMPTS[0], LONG_TOKENS)
        assert (text, cached) == (cold["long0"], 0)
        note(f"  (b) after the restart: archive {stats!r}; long0 cold-identical")
        check_still_works(server, tmp_path, cold, "fresh1", "(b)")
    finally:
        server.stop()
    note(f"  (b) verify after: {cache_verify(tmp_path)}")


def stream(server, messages, chunks: list[int], index: int, errors: list[BaseException]) -> None:
    body = {
        "model": MODEL,
        "messages": messages,
        "temperature": 0,
        "max_tokens": STREAM_TOKENS,
        "stream": True,
    }
    try:
        with httpx.stream(
            "POST", f"{server.url}/v1/chat/completions", json=body, timeout=120
        ) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: {"):
                    chunks[index] += 1
    except httpx.HTTPError as exc:  # the kill
        errors.append(exc)


def test_a_kill_in_the_middle_of_four_streams(tmp_path: Path, cold: dict[str, str]) -> None:
    server = serve(tmp_path)
    chunks, errors = [0] * 4, []
    threads = [
        threading.Thread(target=stream, args=(server, m, chunks, i, errors))
        for i, m in enumerate(STREAM_PROMPTS)
    ]
    for t in threads:
        t.start()
    assert wait_for(lambda: min(chunks) >= 2, 60, 0.005), chunks
    seen = list(chunks)
    kill(server)
    for t in threads:
        t.join(60)
    state = disk_state(tmp_path)
    note(
        f"(c) kill with 4 streams at {seen} chunks of {STREAM_TOKENS} tokens: left {state}; "
        f"verify: {cache_verify(tmp_path)}; {len(errors)} clients saw the connection cut"
    )
    assert len(errors) == 4  # no stream was finished: the kill was in the middle of all four
    server = serve(tmp_path)
    try:
        served = []
        for i, messages in enumerate(STREAM_PROMPTS):
            text, cached = ask(server, messages, STREAM_TOKENS)
            assert text == cold[f"stream{i}"]
            served.append(cached)
        note(f"  (c) after the restart: 4 answers cold-identical, cached_tokens {served}")
        check_still_works(server, tmp_path, cold, "fresh2", "(c)")
    finally:
        server.stop()
    note(f"  (c) verify after: {cache_verify(tmp_path)}")
