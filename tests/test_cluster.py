"""Two real `reame serve` replicas sharing a real redis-server, behind the shipped HAProxy
config on real haproxy, on 127.0.0.1: a replica that never saw a 1.5k-token system prompt
restores it from the shared tier and answers as a cold request does; the tier going away
mid-run costs no request; each replica drafts from the other's answers; HAProxy keeps a
conversation on one replica by its route key (or by the body), a Responses chain too, spreads
conversations, falls back to round robin without a key, and routes around a replica that is not
ready."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import httpx
import pytest
from openai import OpenAI

from haproxy_process import HAProxy
from reame.route_key import ROUTE_HEADER, responses_chain, route_key
from reame_bench.workloads import filler_text
from redis_server import RedisServer
from server_process import ServerProcess

MODEL = "smollm2-135m"
SYSTEM = "Answer in one short sentence. " + filler_text(seed=1515, num_words=1500)


SECRET = secrets.token_hex(32)  # the replicas' shared tier is signed with it


def replica(store: RedisServer) -> ServerProcess:
    env = {"REAME_SHARED_STORE": store.url, "REAME_SHARED_STORE_SYNC_SECONDS": "0.5"}
    env["REAME_SHARED_STORE_SECRET"] = SECRET
    env["REAME_SPEC"] = "on"  # NOTE: drafts kept whether or not they pay at 1 thread here
    args = ("--threads", "1", "--parallel", "2", "--context-length", "4096")
    return ServerProcess(*args, env=env)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[RedisServer, ServerProcess, ServerProcess, HAProxy]]:
    store = RedisServer()
    one = replica(store)
    two = replica(store)
    proxy = HAProxy([f"127.0.0.1:{one.port}", f"127.0.0.1:{two.port}"])
    yield store, one, two, proxy
    proxy.stop()
    one.stop()
    two.stop()
    store.stop()


def client(url: str) -> OpenAI:
    return OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=120)


def ask(url: str, messages: list[dict], max_tokens: int = 16, **headers: str):
    """A chat computed (a greedy one asked again would come from the answer memory, which
    these tests of the prefix cache, the Palimpsest and the routing do not time)."""
    return client(url).chat.completions.create(
        model=MODEL, messages=messages, temperature=0, max_tokens=max_tokens,
        extra_headers=headers or None, extra_body={"answer_memory": False},
    )  # fmt: skip


def chats_served(server: ServerProcess, route: str = "chat/completions") -> int:
    text = httpx.get(f"{server.url}/metrics").text
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("reame_requests_total{") and f'{route}"' in line
        )
    )


def wait_for(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_replica_restores_a_system_prompt_it_never_saw_from_the_shared_tier(cluster) -> None:
    store, one, two, _ = cluster
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Why?"}]
    cold = ask(one.url, messages)
    assert cold.usage.prompt_tokens >= 1500
    assert cold.usage.prompt_tokens_details.cached_tokens == 0
    # NOTE: all put by `one` itself, but those a longer state queued after them holds (its
    # blob serves them); read in this order, a snapshot taken meanwhile only waits longer
    wait_for(
        lambda: (
            one.metric("reame_prefix_cache_writes_total", 'tier="shared"')
            >= one.metric("reame_prefix_cache_snapshots_total")
            - one.metric("reame_prefix_cache_writes_covered_total")
            - one.metric("reame_prefix_cache_write_drops_total")
            > 0
        )
    )
    assert len(store.client().keys("reame:kv:*:b:*")) >= 1
    shared = two.metric("reame_reuse_matches_total", 'tier="shared"')
    warm = ask(two.url, messages)
    assert warm.usage.prompt_tokens_details.cached_tokens >= 1500
    assert warm.choices[0].message.content == cold.choices[0].message.content
    assert two.metric("reame_reuse_matches_total", 'tier="shared"') == shared + 1


def test_a_replica_answers_from_the_memory_another_replica_kept(cluster) -> None:
    """An answer kept on one replica goes to the tier signed; the other finds it there."""
    store, one, two, _ = cluster
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Name two oceans."}],
            "temperature": 0, "max_tokens": 16}  # fmt: skip
    first = httpx.post(f"{one.url}/v1/chat/completions", json=body, timeout=120)
    assert first.status_code == 200
    wait_for(lambda: len(store.client().keys("reame:ans:*")) >= 1)
    shared = two.metric("reame_answer_memory_lookups_total", 'result="hit_shared"')
    again = httpx.post(f"{two.url}/v1/chat/completions", json=body, timeout=120)
    assert again.headers.get("x-reame-memory") == "hit"
    assert again.json()["choices"][0]["message"] == first.json()["choices"][0]["message"]
    assert two.metric("reame_answer_memory_lookups_total", 'result="hit_shared"') == shared + 1


def test_each_replica_drafts_from_the_answers_the_other_gave(cluster) -> None:
    _, one, two, _ = cluster
    messages = [{"role": "user", "content": "List the planets of the solar system, one a line."}]
    imported = two.metric("reame_palimpsest_imported_records_total")
    first = ask(one.url, messages, max_tokens=64)
    # NOTE: more than before this answer: an earlier test's answers were imported already
    wait_for(lambda: two.metric("reame_palimpsest_imported_records_total") > imported)
    accepted = two.metric("reame_accepted_draft_tokens_total", 'drafter="palimpsest"')

    def drafted_from_the_first() -> bool:
        """NOTE: asked again until it drafts: the records imported first may be an earlier
        test's, this answer's coming with the next sync (seen once in a full run)."""
        again = ask(two.url, messages, max_tokens=64)
        assert again.choices[0].message.content == first.choices[0].message.content
        return two.metric("reame_accepted_draft_tokens_total", 'drafter="palimpsest"') > accepted

    wait_for(drafted_from_the_first)


def test_the_tier_going_away_mid_run_costs_no_request(cluster) -> None:
    store, one, two, _ = cluster
    errors = sum(
        s.metric("reame_shared_store_errors_total", f'reason="{r}"')
        for s in (one, two)
        for r in ("connection", "timeout")
    )
    store.stop()
    try:
        for k, server in enumerate([one, two, one, two]):
            question = f"Question {k}: {filler_text(seed=70 + k, num_words=120)}"
            answer = ask(server.url, [{"role": "user", "content": question}], max_tokens=4)
            assert answer.choices[0].finish_reason in ("stop", "length")
        assert (
            sum(
                s.metric("reame_shared_store_errors_total", f'reason="{r}"')
                for s in (one, two)
                for r in ("connection", "timeout")
            )
            > errors
        )
    finally:
        store.start()


def conversation(k: int) -> list[dict]:
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"Tell me about topic number {k}."},
    ]


def test_haproxy_keeps_each_conversation_on_one_replica_and_spreads_them(cluster) -> None:
    _, one, two, proxy = cluster
    placed = []
    for k in range(6):
        messages = conversation(k)
        key = route_key(MODEL, messages)
        before = (chats_served(one), chats_served(two))
        first = client(proxy.by_key).chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, temperature=0, max_tokens=4,
            extra_headers={ROUTE_HEADER: key},
        )  # fmt: skip
        assert first.headers[ROUTE_HEADER] == key  # what the client computed, Reame agrees
        answer = first.parse().choices[0].message.content
        turns = [*messages, {"role": "assistant", "content": answer}]
        for turn in range(2):
            turns.append({"role": "user", "content": f"And then {turn}?"})
            ask(proxy.by_key, turns, max_tokens=4, **{ROUTE_HEADER: key})
        after = (chats_served(one), chats_served(two))
        moved = (after[0] - before[0], after[1] - before[1])
        assert sorted(moved) == [0, 3]  # all three turns on one replica
        placed.append(moved.index(3))
    assert set(placed) == {0, 1}  # and the conversations on both


def test_haproxy_without_the_header_goes_round_robin(cluster) -> None:
    _, one, two, proxy = cluster
    before = (chats_served(one), chats_served(two))
    for _ in range(10):
        ask(proxy.by_key, conversation(0), max_tokens=2)
    served = (chats_served(one) - before[0], chats_served(two) - before[1])
    # NOTE: on a consistent-hash backend HAProxy's round robin walks the hash ring, so it
    # spreads without alternating strictly
    assert sum(served) == 10 and min(served) >= 3, served


def test_haproxy_by_body_keeps_a_conversation_on_one_replica_without_a_header(cluster) -> None:
    _, one, two, proxy = cluster
    before = (chats_served(one), chats_served(two))
    turns = conversation(3)
    for turn in range(3):
        ask(proxy.by_body, turns, max_tokens=2)
        turns = [*turns, {"role": "assistant", "content": "Yes."}]
        turns.append({"role": "user", "content": f"More {turn}?"})
    assert sorted((chats_served(one) - before[0], chats_served(two) - before[1])) == [0, 3]


def test_haproxy_by_body_keeps_a_responses_chain_where_its_state_is(cluster) -> None:
    """Each chain's three calls on the replica that stored its first (elsewhere its
    previous_response_id would be a 404), and the chains on both replicas; the header frontend
    likewise with the route key the client computes before its first call."""
    _, one, two, proxy = cluster
    placed = []
    for k in range(6):
        instructions = f'Answer in a word.\nQuiz {k} \u00e8 "hard".'
        first = {"role": "user", "content": f"Capital of country {k}?"}
        key = "r-" + responses_chain(MODEL, instructions, first["content"])
        for url, headers in ((proxy.by_body, {}), (proxy.by_key, {ROUTE_HEADER: key})):
            api = client(url)
            before = (chats_served(one, "responses"), chats_served(two, "responses"))
            made = api.responses.with_raw_response.create(
                model=MODEL, instructions=instructions, input=[first], max_output_tokens=2,
                temperature=0, extra_headers=headers,
            )  # fmt: skip
            assert made.headers[ROUTE_HEADER] == key
            previous = made.parse().id
            for turn in range(2):
                previous = api.responses.create(
                    model=MODEL, instructions=instructions, input=f"And {turn}?",
                    previous_response_id=previous, max_output_tokens=2, temperature=0,
                    extra_headers=headers,
                ).id  # fmt: skip
            after = (chats_served(one, "responses"), chats_served(two, "responses"))
            moved = (after[0] - before[0], after[1] - before[1])
            assert sorted(moved) == [0, 3], (url, moved)
            placed.append(moved.index(3))
    assert set(placed) == {0, 1}


def test_haproxy_routes_around_a_replica_that_is_not_ready(cluster) -> None:
    store, one, two, proxy = cluster
    two.stop()
    proxy.wait_up(1)
    for k in range(4):  # keys of both replicas: every one answered by the one left
        messages = conversation(k)
        key = route_key(MODEL, messages)
        answer = ask(proxy.by_key, messages, max_tokens=2, **{ROUTE_HEADER: key})
        assert answer.choices[0].message.content
