"""The compose profile `cluster` run for real, with `monitoring` beside it: two replicas sharing
Valkey behind the shipped HAProxy config, Prometheus scraping them all, the model pulled into the
volume by the documented command. Through HAProxy's published port, with the openai client: a
conversation's turns stay on one replica by its route key; a long system prompt answered on one
replica is restored from Valkey on the other; every query of the dashboard's row "Cluster"
answers. Also `compose config` of the profile (no engine needed).

No registry serves Valkey, HAProxy or Prometheus here: each is built from Debian's package
(tests/images), passed as VALKEY_IMAGE, HAPROXY_IMAGE and PROMETHEUS_IMAGE. Skipped, saying why,
without a Docker engine or the appliance image (REAME_IMAGE, default reame:local).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from compose_cli import (
    COMPOSE_FILE,
    compose,
    docker_engine,
    pull_model_into_volume,
    stand_in_image,
)
from dashboard_queries import (
    CLUSTER_ROW,
    MODEL,
    grafana_expr,
    panels,
    panels_without_data,
    wait_for_a_scrape,
)
from haproxy_process import SHIPPED
from reame.route_key import ROUTE_HEADER, route_key
from reame_bench.workloads import filler_text
from server_process import free_port

PROFILES = ("--profile", "cluster", "--profile", "monitoring")
# NOTE: Grafana's image cannot be built from Debian's packages: its provisioning is checked as
# files (test_dashboard.py), its queries here against the Prometheus it would ask
SERVICES = ("replica", "valkey", "haproxy", "prometheus")
LONG_SYSTEM = "Answer in one short sentence. " + filler_text(seed=1515, num_words=1500)
SHORT_SYSTEM = "Answer in one word. " + filler_text(seed=77, num_words=200)
# Small enough that two replicas and the lone `reame` (Prometheus depends on it) share 2 cores:
# one thread each; a Palimpsest sync every 0.5 s so an answer reaches the other replica within
# the test.
OVERRIDE = """
services:
  reame:
    environment: {REAME_THREADS: "1", REAME_CONTEXT_LENGTH: "1024", REAME_PARALLEL: "1"}
  replica:
    environment:
      REAME_THREADS: "1"
      REAME_CONTEXT_LENGTH: "4096"
      REAME_PARALLEL: "2"
      REAME_SHARED_STORE_SYNC_SECONDS: "0.5"
"""


@dataclass
class Cluster:
    env: dict[str, str]
    by_key: str  # HAProxy :8000, by the route key header
    by_body: str  # HAProxy :8001, by the request's JSON
    stats: str  # HAProxy :8404
    prometheus: str
    replicas: list[str]  # each replica's own URL on the project's network, in container order
    valkey: object  # its container, to pause


def published(env: dict[str, str], variable: str) -> str:
    return f"http://{env[variable]}"


def containers(engine, project: str, service: str) -> list:
    labels = [f"com.docker.compose.project={project}", f"com.docker.compose.service={service}"]
    found = engine.containers.list(filters={"label": labels})
    return sorted(found, key=lambda c: int(c.labels["com.docker.compose.container-number"]))


def address(container) -> str:
    (network,) = container.attrs["NetworkSettings"]["Networks"].values()
    return network["IPAddress"]


def logs(env: dict[str, str]) -> str:
    return compose(*PROFILES, "logs", "--tail", "30", env=env).stdout


def servers_up(stats: str) -> dict[str, int]:
    """Servers passing their /ready check, per HAProxy backend, as its exporter says."""
    with urllib.request.urlopen(f"{stats}/metrics", timeout=5) as r:
        text = r.read().decode()
    up: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("haproxy_server_status{") and 'state="UP"' in line:
            proxy = line.split('proxy="', 1)[1].split('"', 1)[0]
            up[proxy] = up.get(proxy, 0) + line.endswith(" 1")
    return up


def wait_for(check: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except (OSError, httpx.TransportError):
            pass
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    engine = docker_engine()
    override = tmp_path_factory.mktemp("compose") / "cluster-small.yaml"
    override.write_text(OVERRIDE)
    project = f"reame-test-{uuid.uuid4().hex[:8]}"
    env = {
        "COMPOSE_FILE": f"{COMPOSE_FILE}:{override}",
        "COMPOSE_PROJECT_NAME": project,
        "VALKEY_IMAGE": stand_in_image(engine, "valkey"),
        "HAPROXY_IMAGE": stand_in_image(engine, "haproxy"),
        "PROMETHEUS_IMAGE": stand_in_image(engine, "prometheus"),
        "REAME_CPUS": "1",
        "REAME_MEMORY": "1g",
        "REAME_REPLICA_CPUS": "1",
        "REAME_REPLICA_MEMORY": "1536m",
        "VALKEY_MAXMEMORY": "256mb",
        # the cluster profile's two secrets: without them Valkey, and so the replicas, refuse
        "VALKEY_PASSWORD": secrets.token_hex(16),
        "REAME_SHARED_STORE_SECRET": secrets.token_hex(32),
        **{
            variable: f"127.0.0.1:{free_port()}"
            for variable in (
                "REAME_PUBLISH",
                "CLUSTER_PUBLISH",
                "CLUSTER_BODY_PUBLISH",
                "HAPROXY_STATS_PUBLISH",
                "PROMETHEUS_PUBLISH",
            )
        },
    }
    try:
        pull_model_into_volume(engine, env, smollm2_path)
        started = compose(
            *PROFILES, "up", "-d", "--wait", "--no-build", *SERVICES, env=env, timeout=300
        )
        assert started.returncode == 0, started.stderr + logs(env)
        stats = published(env, "HAPROXY_STATS_PUBLISH")
        wait_for(
            lambda: set(servers_up(stats).values()) == {2},
            what="HAProxy seeing both replicas UP on both backends\n" + logs(env),
        )
        (valkey,) = containers(engine, project, "valkey")
        yield Cluster(
            env=env,
            by_key=published(env, "CLUSTER_PUBLISH"),
            by_body=published(env, "CLUSTER_BODY_PUBLISH"),
            stats=stats,
            prometheus=published(env, "PROMETHEUS_PUBLISH"),
            replicas=[f"http://{address(c)}:8000" for c in containers(engine, project, "replica")],
            valkey=valkey,
        )
    finally:
        compose(*PROFILES, "down", "-v", "--remove-orphans", env=env, timeout=180)


def metric(url: str, name: str, labels: str = "") -> float:
    """One sample of a replica's /metrics, 0 when it has none yet."""
    wanted = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith(wanted):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def chats_served(cluster: Cluster) -> list[int]:
    return [
        int(
            sum(
                float(line.rsplit(" ", 1)[1])
                for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines()
                if line.startswith("reame_requests_total{") and "chat/completions" in line
            )
        )
        for url in cluster.replicas
    ]


def ask(cluster: Cluster, messages: list[dict], key: str | None, max_tokens: int = 4):
    """One chat through HAProxy's published port (by `key`, or by the body without one), and
    the replica that answered it. Computed, never recalled: the same chat sent to the other
    replica would otherwise be answered from the answer memory the replicas share."""
    before = chats_served(cluster)
    front = cluster.by_key if key else cluster.by_body
    client = OpenAI(base_url=f"{front}/v1", api_key="none", max_retries=0, timeout=120)
    answer = client.chat.completions.create(
        model=MODEL, messages=messages, temperature=0, max_tokens=max_tokens,
        extra_headers={ROUTE_HEADER: key} if key else None,
        extra_body={"answer_memory": False},
    )  # fmt: skip
    moved = [after - was for after, was in zip(chats_served(cluster), before, strict=True)]
    assert sorted(moved) == [0, 1], moved
    return answer, moved.index(1)


def conversation(k: int) -> list[dict]:
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": f"Tell me about topic number {k}."},
    ]


def key_of(k: int) -> str:
    return route_key(MODEL, conversation(k))


@pytest.fixture(scope="module")
def conversation_by_replica(cluster: Cluster) -> dict[int, int]:
    """Replica to a conversation HAProxy sent there by its route key: first turns, each with
    its own key, until both replicas have answered one."""
    wait_for_a_scrape(cluster.prometheus)  # so that the traffic shows as an increase
    found: dict[int, int] = {}
    for k in range(16):
        _, replica = ask(cluster, conversation(k), key_of(k))
        found.setdefault(replica, k)
        if len(found) == len(cluster.replicas):
            return found
    raise AssertionError(f"16 route keys all went to one replica: {found}")


@pytest.mark.model
def test_the_turns_of_a_conversation_land_on_the_replica_its_route_key_chose(
    cluster: Cluster, conversation_by_replica: dict[int, int]
) -> None:
    for replica, k in conversation_by_replica.items():
        turns = conversation(k)
        for turn in range(3):
            turns = [*turns, {"role": "assistant", "content": "Yes."}]
            turns.append({"role": "user", "content": f"And then {turn}?"})
            answer, served_by = ask(cluster, turns, key_of(k))
            assert served_by == replica
            assert answer.choices[0].message.content


@pytest.mark.model
def test_without_the_header_haproxy_keeps_a_conversation_on_one_replica_by_its_body(
    cluster: Cluster,
) -> None:
    turns, served = conversation(99), set()
    for turn in range(3):
        served.add(ask(cluster, turns, key=None)[1])
        turns = [*turns, {"role": "assistant", "content": "Yes."}]
        turns.append({"role": "user", "content": f"More {turn}?"})
    assert len(served) == 1


@dataclass
class Restored:
    cold: object
    warm: object
    served_by: tuple[int, int]
    # on the second replica, before and after: requests that went on from the shared tier
    shared_matches: tuple[float, float]


def shared_writes(url: str) -> float:
    """Snapshots a replica itself put in the shared tier."""
    return metric(url, "reame_prefix_cache_writes_total", 'tier="shared"')


def new_snapshots(url: str) -> float:
    """Snapshots a replica took that its writer did not drop, nor leave to a longer one."""
    dropped = metric(url, "reame_prefix_cache_write_drops_total")
    covered = metric(url, "reame_prefix_cache_writes_covered_total")
    return metric(url, "reame_prefix_cache_snapshots_total") - dropped - covered


def from_shared(url: str) -> float:
    """Requests a replica admitted that went on from a state of the shared tier (whole, or cut
    back where the prompt parts from it: the lookups count those under another label)."""
    return metric(url, "reame_reuse_matches_total", 'tier="shared"')


def share(cluster: Cluster, conversation_by_replica: dict[int, int], system: str) -> Restored:
    """A system prompt through HAProxy to replica 1, then (once its snapshots are in Valkey)
    the same chat to replica 2, each chosen by a route key HAProxy sends there."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Why?"}]
    first, second = cluster.replicas
    written, snapshots = shared_writes(first), new_snapshots(first)
    cold, one = ask(cluster, messages, key_of(conversation_by_replica[0]), max_tokens=16)
    # NOTE: replica 1's own puts, not blobs in Valkey: a write of replica 2's, landing late,
    # met a wait on the blobs early (it found 512 tokens of 1514, or none). Read in this
    # order, a snapshot taken meanwhile only makes the wait longer
    wait_for(
        lambda: shared_writes(first) - written >= new_snapshots(first) - snapshots > 0,
        what="replica 1's new snapshots in Valkey",
    )
    shared = from_shared(second)
    warm, two = ask(cluster, messages, key_of(conversation_by_replica[1]), max_tokens=16)
    return Restored(cold, warm, (one, two), (shared, from_shared(second)))


@pytest.fixture(scope="module")
def restored(cluster: Cluster, conversation_by_replica: dict[int, int]) -> Restored:
    return share(cluster, conversation_by_replica, LONG_SYSTEM)


@pytest.mark.model
def test_a_system_prompt_answered_on_one_replica_is_restored_from_valkey_on_the_other(
    restored: Restored,
) -> None:
    assert restored.served_by == (0, 1)
    assert restored.cold.usage.prompt_tokens >= 1500
    assert restored.cold.usage.prompt_tokens_details.cached_tokens == 0
    assert restored.warm.usage.prompt_tokens_details.cached_tokens >= 1500
    assert restored.warm.choices[0].message.content == restored.cold.choices[0].message.content
    before, after = restored.shared_matches
    assert after == before + 1


def up_series(prometheus: str, job: str) -> list[str]:
    query = {"query": f'up{{job="{job}"}}'}
    body = httpx.get(f"{prometheus}/api/v1/query", params=query, timeout=10).json()
    return [series["value"][1] for series in body["data"]["result"]]


@pytest.mark.model
def test_prometheus_scrapes_every_replica_and_haproxy(cluster: Cluster) -> None:
    def scraped() -> bool:
        replicas = up_series(cluster.prometheus, "reame-replicas")
        return replicas == ["1", "1"] and up_series(cluster.prometheus, "haproxy") == ["1"]

    # NOTE: DNS service discovery looks again every 30 s (its default refresh_interval)
    wait_for(scraped, timeout=60, what="up{job=reame-replicas} 1 1 and up{job=haproxy} 1")


def shared_errors(cluster: Cluster) -> float:
    return sum(
        metric(url, "reame_shared_store_errors_total", f'reason="{reason}"')
        for url in cluster.replicas
        for reason in ("timeout", "connection", "skipped")
    )


def shared_hit_rate(prometheus: str) -> float:
    (panel,) = [p for p in panels(CLUSTER_ROW) if p["title"] == "Shared tier hit rate"]
    query = {"query": grafana_expr(panel["targets"][0]["expr"])}
    body = httpx.get(f"{prometheus}/api/v1/query", params=query, timeout=10).json()
    (series,) = body["data"]["result"]
    return float(series["value"][1])


@pytest.mark.model
def test_every_query_of_the_cluster_row_returns_data(
    cluster: Cluster, conversation_by_replica: dict[int, int], restored: Restored
) -> None:
    # NOTE: a second restore, once Prometheus has scraped the first, so that the hit rate's
    # window surely holds one
    wait_for_a_scrape(cluster.prometheus)
    again = share(cluster, conversation_by_replica, SHORT_SYSTEM)
    assert again.served_by == (0, 1) and again.warm.usage.prompt_tokens_details.cached_tokens
    assert again.shared_matches[1] == again.shared_matches[0] + 1
    # Valkey frozen for a moment: the Palimpsest's sync times out, as a tier that hangs does,
    # and the errors panel has something to show
    errors = shared_errors(cluster)
    cluster.valkey.pause()
    try:
        wait_for(lambda: shared_errors(cluster) > errors, timeout=20, what="a shared-tier error")
    finally:
        cluster.valkey.unpause()
    # NOTE: the panels alone were no wait: with the first restore's match scraped, the hit
    # rate reads 0, which is data, until a scrape holds the second's (CI read 0)
    wait_for_a_scrape(cluster.prometheus)
    failing = panels_without_data(cluster.prometheus, wait=60, row=CLUSTER_ROW)
    assert not failing, "panels without data:\n" + failing + "\n" + logs(cluster.env)
    assert shared_hit_rate(cluster.prometheus) > 0


# -- the profile as Compose reads it (no engine needed) ------------------------------------------


def test_the_cluster_profile_puts_the_shipped_haproxy_before_replicas_sharing_valkey() -> None:
    listed = compose("--profile", "cluster", "config", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    services = json.loads(listed.stdout)["services"]
    assert {"replica", "valkey", "haproxy"} <= set(services)
    assert services["replica"]["environment"]["REAME_SHARED_STORE"] == "redis://valkey:6379/0"
    assert "allkeys-lru" in services["valkey"]["command"]
    mounted = {v["source"]: v["target"] for v in services["haproxy"]["volumes"]}
    assert mounted[str(SHIPPED)] == "/usr/local/etc/haproxy/haproxy.cfg"
    if shutil.which("haproxy"):
        checked = subprocess.run(["haproxy", "-c", "-f", str(SHIPPED)], capture_output=True)
        assert checked.returncode == 0, checked.stderr
    default = json.loads(compose("config", "--format", "json").stdout)["services"]
    assert "replica" not in default  # only with the profile
