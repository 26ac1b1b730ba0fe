"""HAProxy in front of the replicas must not amplify: a request that kills the replica serving it
is not replayed on the others, a replica answering errors while its /ready passes stays in
rotation, and the drain still works (its 503 is served by another replica, and the draining one
is taken out within a second). The shipped config (docker/haproxy/haproxy.cfg, which the
playbook renders too) is read, then run on Debian's haproxy in front of stand-in replicas that
answer on demand (tests/edge_replica.py) and of real Reame replicas, one killed mid-answer.

Before: `error-limit 1 on-error mark-down` took a replica out on its first 5xx, so one client
sending requests that fail took every replica out in turn, and `retry-on ... empty-response`
sent a request that killed its replica on to the next one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from edge_replica import EdgeReplica
from haproxy_config import amplifications, directives, open_stats_pages, retry_conditions
from haproxy_process import SHIPPED, HAProxy
from reame.route_key import ROUTE_HEADER
from reame_bench.cluster_processes import SERVER_HEADER
from reame_bench.serve_process import free_port
from server_process import ServerProcess, small_server

MODEL = "smollm2-135m"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


# -- the config as written -----------------------------------------------------------------------


def test_the_shipped_config_neither_replays_nor_takes_a_replica_out_on_an_error() -> None:
    text = SHIPPED.read_text()
    assert amplifications(text) == []
    # the drain's 503 and a refused connection are still retried: neither was served
    assert {"503", "conn-failure"} <= retry_conditions(text)
    # a fresh connection a request: an empty answer is the replica's doing, never a reused
    # connection it had closed meanwhile, so not retrying it costs no healthy request
    assert ("defaults", ["option", "http-server-close"]) in directives(text, "option")


def test_the_shipped_config_serves_no_stats_page_without_a_login() -> None:
    text = SHIPPED.read_text()
    assert open_stats_pages(text) == []
    # Prometheus' scrape stays
    exporter = [w for _, w in directives(text, "http-request") if "prometheus-exporter" in w]
    assert exporter


def test_the_checks_see_what_the_old_config_did_wrong() -> None:
    old = """
defaults
    retry-on conn-failure empty-response 503
    stats enable
backend b
    default-server check inter 2s fall 2 rise 2 observe layer7 error-limit 1 on-error mark-down
"""
    assert len(amplifications(old)) == 2
    assert open_stats_pages(old) == ["defaults"]


# -- real haproxy in front of stand-in replicas --------------------------------------------------


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[callable]:
    """Starts stand-ins by mode, then HAProxy on the shipped config in front of them."""
    started: list[EdgeReplica | HAProxy] = []

    def start(*modes: str) -> tuple[HAProxy, list[EdgeReplica]]:
        stand_ins = [EdgeReplica(free_port(), mode, tmp_path) for mode in modes]
        started.extend(stand_ins)
        proxy = HAProxy([r.address for r in stand_ins], name_servers=True)
        started.append(proxy)
        return proxy, stand_ins

    yield start
    for process in reversed(started):
        process.stop()


def key_to(proxy: HAProxy, server: str) -> str:
    """A route key HAProxy sends to `server` (r1, r2, ...), found with GETs every mode serves."""
    for k in range(64):
        key = f"conversation-{k}"
        r = httpx.get(f"{proxy.by_key}/probe", headers={ROUTE_HEADER: key}, timeout=10)
        if r.headers.get(SERVER_HEADER) == server:
            return key
    raise AssertionError(f"no route key of 64 went to {server}")


def post(proxy: HAProxy, key: str) -> httpx.Response:
    return httpx.post(
        f"{proxy.by_key}/v1/chat/completions", json=CHAT, headers={ROUTE_HEADER: key}, timeout=30
    )


def test_a_request_that_kills_its_replica_is_not_replayed_on_another(replicas) -> None:
    proxy, (dying, other) = replicas("die", "ok")
    answer = post(proxy, key_to(proxy, "r1"))
    assert answer.status_code == 502  # HAProxy's: the replica closed with nothing said
    assert dying.posts() == 1
    assert other.posts() == 0, "the request that killed r1 was replayed on r2"


def test_a_replica_answering_errors_stays_in_rotation_while_its_ready_passes(replicas) -> None:
    proxy, (failing, other) = replicas("fail", "ok")
    key = key_to(proxy, "r1")
    statuses = [post(proxy, key).status_code for _ in range(10)]
    assert statuses == [500] * 10  # answered by r1 each time, never resent
    assert (failing.posts(), other.posts()) == (10, 0)
    time.sleep(1.5)  # several checks (every 300 ms here): /ready passes, so r1 stays
    assert proxy.servers_up() == 2


def test_a_draining_replicas_503_is_served_by_another_which_takes_over(replicas) -> None:
    proxy, (draining, other) = replicas("drain", "ok")
    key = key_to(proxy, "r1")
    answer = post(proxy, key)
    assert answer.status_code == 200 and answer.headers[SERVER_HEADER] == "r2"
    assert (draining.posts(), other.posts()) == (1, 1)
    # its 503 brings its next checks forward (fastinter 250 ms): out well before `inter` twice
    began = time.monotonic()
    proxy.wait_up(1, timeout=5)
    assert time.monotonic() - began < 2.0
    assert post(proxy, key).headers[SERVER_HEADER] == "r2"


# -- real haproxy in front of real replicas ------------------------------------------------------


def chats_served(server: ServerProcess) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("reame_requests_total{") and "chat/completions" in line
    )


@pytest.mark.model
def test_a_replica_killed_mid_answer_costs_that_answer_and_no_other_replicas_work() -> None:
    one = small_server(threads=1, parallel=2)
    two = small_server(threads=1, parallel=2)
    proxy = HAProxy([f"127.0.0.1:{one.port}", f"127.0.0.1:{two.port}"], name_servers=True)
    try:
        key = key_to(proxy, "r1")
        long = {**CHAT, "max_tokens": 400, "ignore_eos": True}
        answers: list[httpx.Response | Exception] = []

        def ask() -> None:
            try:
                answers.append(
                    httpx.post(
                        f"{proxy.by_key}/v1/chat/completions",
                        json=long,
                        headers={ROUTE_HEADER: key},
                        timeout=120,
                    )
                )
            except httpx.HTTPError as exc:
                answers.append(exc)

        asking = threading.Thread(target=ask)
        asking.start()
        deadline = time.monotonic() + 30
        while one.metric("reame_running_sequences") < 1:
            assert time.monotonic() < deadline, "the long answer never started on r1"
            time.sleep(0.05)
        one.proc.kill()  # SIGKILL mid-answer, as the OOM killer does
        asking.join(120)
        (answer,) = answers
        assert isinstance(answer, httpx.Response) and answer.status_code == 502, answer
        assert chats_served(two) == 0, "the answer r1 died in was computed again on r2"
    finally:
        proxy.stop()
        one.stop()
        two.stop()


@pytest.mark.model
def test_a_request_that_kills_its_engine_thread_is_not_replayed_on_another() -> None:
    faulty = str(Path(__file__).with_name("faulty_serve.py"))  # a prompt with DIE kills it
    one = small_server(threads=1, entry=faulty)
    two = small_server(threads=1, entry=faulty)
    proxy = HAProxy([f"127.0.0.1:{one.port}", f"127.0.0.1:{two.port}"], name_servers=True)
    try:
        killer = {**CHAT, "messages": [{"role": "user", "content": "DIE now"}]}
        answer = httpx.post(
            f"{proxy.by_key}/v1/chat/completions",
            json=killer,
            headers={ROUTE_HEADER: key_to(proxy, "r1")},
            timeout=60,
        )
        assert answer.status_code >= 500
        assert httpx.get(f"{two.url}/health", timeout=10).status_code == 200, (
            "the request that killed r1's engine was replayed on r2 and killed it too"
        )
    finally:
        proxy.stop()
        one.stop()
        two.stop()
