"""The prefix cache on the real SmolLM2: restored prefixes give exactly what computing them
gives, in RAM, from disk after a restart, and across two server processes; a bad file is a
miss and a recompute, never a wrong answer."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from conftest import small_settings
from reame import metrics
from reame.cache.disk_tier import SUFFIX
from reame.cache.snapshot_format import decode
from reame.runtime import Runtime
from reame.service import Job
from reame_bench.workloads import filler_text
from server_process import ServerProcess

pytestmark = pytest.mark.model

MODEL = "smollm2-135m"
SYSTEM = "You answer in one short sentence. " + filler_text(seed=3, num_words=300)


def chat(question: str, system: str = SYSTEM) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def answer(runtime: Runtime, question: str, system: str = SYSTEM) -> tuple[list[int], int]:
    """Greedy tokens and how many prompt tokens were restored, through the service as the HTTP
    layer uses it (with the message marks)."""
    service = runtime.service
    messages = chat(question, system)
    prompt = service.chat.prompt(messages)
    job = Job(
        prompt,
        service.sampling(temperature=0.0, max_tokens=24),
        marks=service.chat.marks(messages, prompt),
    )
    events = list(_stream(runtime, job))
    finish = events[-1]
    return [e.token for e in events[:-1]], finish.num_cached_tokens


def _stream(runtime: Runtime, job: Job):
    import queue

    from reame.engine.request import FinishEvent

    events: queue.SimpleQueue = queue.SimpleQueue()
    runtime.engine.submit(runtime.service.request(job), events.put)
    while True:
        event = events.get(timeout=120)
        yield event
        if isinstance(event, FinishEvent):
            runtime.service.finished(event)
            return


def lookups(result: str) -> float:
    """This process's prefix cache lookups that ended in `result` (ram, disk, miss)."""
    sample = metrics.REGISTRY.get_sample_value(
        "reame_prefix_cache_lookups_total", {"result": result}
    )
    return sample or 0.0


def cache_settings(path: Path, **extra: object):
    """NOTE: speculation off. These prompts pass 256 tokens, where llama.cpp's CPU attention
    rounds a lone one-token decode otherwise than a verify batch (f16 KV): drafts from the
    archive the first answer filled would change the second's greedy tokens, cache or not."""
    return small_settings(path, spec="off", **extra)


def kvs_files(root: Path) -> list[Path]:
    return sorted(root.rglob(f"*{SUFFIX}"))


@pytest.fixture(scope="module")
def computed(smollm2_path: Path) -> dict[str, list[int]]:
    """Each question's answer computed from scratch, by a server whose cache is empty.

    NOTE: not by a server without a cache. llama.cpp's CPU kernels round differently for a
    batch of under 64 tokens than for a longer one (measured: a prompt's last logits differ by up
    to 0.5 when its last 1-33 tokens are a batch of their own, and not at all from 64 on). A
    cold request with the cache on stops its prefill at the end of the system prompt, where it
    takes a snapshot, so it computes the rest exactly as a request that restores that snapshot.
    """
    out = {}
    for q in ("Name a colour.", "Name a fruit.", "Why?"):
        settings = cache_settings(smollm2_path, prefix_cache_disk=False)
        with Runtime(settings) as runtime:
            out[q] = answer(runtime, q)[0]
    return out


def test_a_cached_system_prompt_is_restored_from_ram_and_answers_identically(
    smollm2_path: Path, computed: dict[str, list[int]], tmp_path: Path
) -> None:
    with Runtime(cache_settings(smollm2_path, state_dir=tmp_path)) as runtime:
        tokens, cached = answer(runtime, "Name a colour.")
        assert (tokens, cached) == (computed["Name a colour."], 0)
        ram_hits, disk_hits = in_ram(), lookups("disk") + lookups("disk_partial")
        tokens, cached = answer(runtime, "Name a fruit.")
        assert tokens == computed["Name a fruit."]
        assert cached >= 300  # the system prompt, not computed again
        assert in_ram() > ram_hits
        assert lookups("disk") + lookups("disk_partial") == disk_hits


def in_ram() -> float:
    """Lookups answered from RAM: by the snapshot at the system prompt's end, or by the first
    answer's final state, which goes on past it and lets it go from RAM (PrefixCache.offer).
    NOTE: which of the two the second request finds depends on whether the first's final state
    came back before it looked (measured: CI's runner found the final state)."""
    return lookups("ram") + lookups("ram_partial")


def test_after_a_restart_the_prefix_comes_from_disk_and_answers_identically(
    smollm2_path: Path, computed: dict[str, list[int]], tmp_path: Path
) -> None:
    with Runtime(cache_settings(smollm2_path, state_dir=tmp_path)) as runtime:
        answer(runtime, "Name a colour.")
    assert kvs_files(tmp_path)  # written before close returned
    # NOTE: no preload, which would have put it in RAM before the request (test_warm_ahead.py)
    settings = cache_settings(smollm2_path, state_dir=tmp_path, prefix_cache_preload=False)
    with Runtime(settings) as runtime:
        disk_hits = lookups("disk")
        tokens, cached = answer(runtime, "Why?")
        assert tokens == computed["Why?"]
        assert cached >= 300
        assert lookups("disk") == disk_hits + 1


def test_a_damaged_file_is_a_miss_and_a_recompute_never_a_wrong_answer(
    smollm2_path: Path, computed: dict[str, list[int]], tmp_path: Path
) -> None:
    with Runtime(cache_settings(smollm2_path, state_dir=tmp_path)) as runtime:
        answer(runtime, "Name a colour.")
    files = kvs_files(tmp_path)
    for i, path in enumerate(files):  # every stored prefix damaged, two ways
        data = bytearray(path.read_bytes())
        if i % 2:
            data[len(data) // 2] ^= 0x10
            path.write_bytes(bytes(data))
        else:
            path.write_bytes(bytes(data[: len(data) // 3]))
    rejected = (
        metrics.REGISTRY.get_sample_value(
            "reame_prefix_cache_rejected_files_total", {"reason": "corrupt"}
        )
        or 0.0
    )
    with Runtime(cache_settings(smollm2_path, state_dir=tmp_path)) as runtime:
        tokens, cached = answer(runtime, "Name a fruit.")
        fingerprint = runtime.cache.fingerprint
    assert (tokens, cached) == (computed["Name a fruit."], 0)
    assert (
        metrics.REGISTRY.get_sample_value(
            "reame_prefix_cache_rejected_files_total", {"reason": "corrupt"}
        )
        > rejected
    )
    # the bad file met on the way was removed, and the recompute stored a good one in its place
    system_prompt_file = min(files, key=lambda f: f.name)  # names start with the length
    assert decode(system_prompt_file.read_bytes(), fingerprint).tokens


def test_a_second_server_process_finds_what_the_first_computed(tmp_path: Path) -> None:
    env = {"REAME_STATE_DIR": str(tmp_path)}
    args = ("--threads", "1", "--parallel", "2", "--context-length", "1024")
    first = ServerProcess(*args, env=env)
    second = ServerProcess(*args, env=env)
    try:
        one, two = client_of(first), client_of(second)
        cold = one.chat.completions.create(
            model=MODEL, messages=chat("Name a colour."), temperature=0, max_tokens=16
        )
        assert cold.usage.prompt_tokens_details.cached_tokens == 0
        deadline = time.monotonic() + 30  # the writer runs in the background
        while first.metric("reame_prefix_cache_bytes", 'tier="disk"') == 0:
            assert time.monotonic() < deadline, "the first process wrote no snapshot"
            time.sleep(0.1)
        warm = two.chat.completions.create(
            model=MODEL, messages=chat("Name a fruit."), temperature=0, max_tokens=16
        )
        assert warm.usage.prompt_tokens_details.cached_tokens >= 300
        assert second.metric("reame_prefix_cache_lookups_total", 'result="disk"') == 1
        assert 0 < second.metric("reame_prefix_cache_hit_ratio") <= 1
        again = one.chat.completions.create(
            model=MODEL, messages=chat("Name a fruit."), temperature=0, max_tokens=16
        )
        assert warm.choices[0].message.content == again.choices[0].message.content
    finally:
        assert first.stop() == 0
        assert second.stop() == 0


def client_of(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0)


def ask_in_session(server: ServerProcess, messages: list[dict[str, str]]):
    return client_of(server).chat.completions.create(
        model=MODEL,
        messages=messages,
        temperature=0,
        max_tokens=20,
        extra_body={"session_id": "kept"},
    )


def test_a_session_survives_a_restart_of_the_server(tmp_path: Path) -> None:
    env = {"REAME_STATE_DIR": str(tmp_path)}
    args = ("--threads", "2", "--parallel", "2", "--context-length", "1024")
    turn1 = chat("Name three colours.")
    server = ServerProcess(*args, env=env)
    try:
        first = ask_in_session(server, turn1)
    finally:
        assert server.stop() == 0
    history = [
        *turn1,
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And three animals?"},
    ]
    server = ServerProcess(*args, env=env)
    try:
        second = ask_in_session(server, history)
        cached = second.usage.prompt_tokens_details.cached_tokens
        # the whole first turn, its answer included, was not computed again
        assert cached >= first.usage.prompt_tokens + first.usage.completion_tokens - 2
        body = {"model": MODEL, "messages": history, "temperature": 0, "max_tokens": 20}
        fresh = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120).json()
        assert second.choices[0].message.content == fresh["choices"][0]["message"]["content"]
    finally:
        assert server.stop() == 0


def test_a_free_sequence_still_holding_the_prefix_is_reused_without_a_copy(
    smollm2_path: Path, computed: dict[str, list[int]]
) -> None:
    # no RAM budget and no disk: only the KV left in the finished request's slot can serve
    settings = cache_settings(smollm2_path, prefix_cache_ram_mb=0, prefix_cache_disk=False)
    with Runtime(settings) as runtime:
        answer(runtime, "Name a colour.")
        assert runtime.cache.lookup(runtime.service.chat.prompt(chat("Why?"))) is None
        tokens, cached = answer(runtime, "Name a fruit.")
    assert tokens == computed["Name a fruit."]
    assert cached >= 300
