"""`reame bench --cluster`, parts (b) and (c): the multi-user chat workload on two replicas
behind the shipped HAProxy config, routed round robin, by route key or by HAProxy's reading of
the body, each with and without a shared tier; and a replica replaced by an empty one mid-run.
Every scenario starts from empty replicas (and an empty redis-server)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reame.route_key import ROUTE_HEADER, route_key
from reame_bench.cluster_client import ChatClient
from reame_bench.cluster_processes import SHIPPED_HAPROXY, HAProxyProcess, RedisProcess
from reame_bench.cluster_workload import Answer, Conversation, lanes
from reame_bench.load_target import first_model
from reame_bench.serve_process import ServeProcess
from reame_bench.sse_reader import BenchTargetError
from reame_bench.targets import Messages

ROUND_ROBIN, ROUTE_KEY, BODY = "round robin", "route key", "body"
REPLACED = "r2"  # the rendered config's second server


@dataclass(frozen=True, slots=True)
class Scenario:
    routing: str
    shared: bool
    replace_after: float | None = None  # the share of answers after which r2 is replaced

    @property
    def name(self) -> str:
        tier = "shared tier" if self.shared else "no shared tier"
        replaced = ", r2 replaced mid-run" if self.replace_after is not None else ""
        return f"{self.routing}, {tier}{replaced}"


@dataclass(slots=True)
class Outcome:
    scenario: Scenario
    answers: list[Answer] = field(default_factory=list)
    seconds: float = 0.0
    replaced_at: float | None = None  # when the empty replica was ready, since the run began
    replacement_start_s: float | None = None  # its start to ready
    tier_bytes: int = 0  # what the shared tier held at the end
    failures: list[str] = field(default_factory=list)  # answers that did not come


def routed(
    routing: str, proxy: HAProxyProcess, model: str, messages: Messages
) -> tuple[str, dict[str, str]]:
    """Where a chat goes and with which headers."""
    if routing == ROUTE_KEY:
        return proxy.by_key, {ROUTE_HEADER: route_key(model, messages)}
    if routing == BODY:
        return proxy.by_body, {}
    return proxy.by_key, {}  # no header: HAProxy's round robin


async def run_scenario(
    scenario: Scenario,
    args: list[str],
    settings: dict[str, str],
    workload: Sequence[Conversation],
    users: int,
    answer_tokens: int,
    log: Callable[[str], None],
    haproxy_config: Path = SHIPPED_HAPROXY,
) -> Outcome:
    store = RedisProcess("1gb") if scenario.shared else None
    env = dict(settings)
    if store is not None:  # NOTE: one signing secret a run, as a deployment's replicas share one
        env |= {"shared_store": store.url, "shared_store_secret": secrets.token_hex(32)}
    replicas: list[ServeProcess] = []
    proxy = client = None
    outcome = Outcome(scenario)
    try:
        replicas = [ServeProcess(args, env), ServeProcess(args, env)]
        servers = [f"127.0.0.1:{r.port}" for r in replicas]
        proxy = HAProxyProcess(servers, haproxy_config, name_servers=True)
        client = ChatClient(first_model(replicas[0].url, {}))
        total = sum(len(c.questions) for c in workload)
        start = time.perf_counter()
        replacing: list[asyncio.Task] = []

        def replace() -> None:
            old = replicas[1]
            old.stop()
            began = time.perf_counter()
            replicas[1] = ServeProcess(old.args, old.settings, port=old.port)  # empty
            outcome.replacement_start_s = time.perf_counter() - began
            outcome.replaced_at = time.perf_counter() - start

        async def user(conversations: list[int]) -> None:
            for k in conversations:
                messages: Messages = [{"role": "system", "content": workload[k].system}]
                for turn, question in enumerate(workload[k].questions, start=1):
                    messages.append({"role": "user", "content": question})
                    base, headers = routed(scenario.routing, proxy, client.model, messages)
                    asked = time.perf_counter() - start
                    try:
                        timeline, server = await client.ask(base, messages, answer_tokens, headers)
                    except BenchTargetError as exc:  # NOTE: a finding, not the bench's end
                        outcome.failures.append(str(exc))
                        break  # the user gives up on this conversation
                    outcome.answers.append(
                        Answer(k, turn, server, asked, timeline.ttft,
                               timeline.num_prompt_tokens, timeline.num_cached_tokens)
                    )  # fmt: skip
                    messages.append({"role": "assistant", "content": timeline.text})
                    due = scenario.replace_after
                    if due is not None and not replacing and len(outcome.answers) >= due * total:
                        log(f"{scenario.name}: replacing {REPLACED} with an empty replica")
                        replacing.append(asyncio.create_task(asyncio.to_thread(replace)))

        log(f"{scenario.name}: {total} answers, {users} users")
        await asyncio.gather(*(user(lane) for lane in lanes(len(workload), users)))
        if replacing:
            await replacing[0]
        outcome.seconds = time.perf_counter() - start
        if store is not None:
            outcome.tier_bytes = store.used_bytes()
    finally:
        if client is not None:
            await client.aclose()
        if proxy is not None:
            proxy.stop()
        for r in replicas:
            r.stop()
        if store is not None:
            store.stop()
    return outcome


def matrix() -> list[Scenario]:
    """Round robin and route key, each with and without the shared tier; the body hash with it;
    then the replacement, by route key, with and without."""
    return [
        Scenario(ROUND_ROBIN, False),
        Scenario(ROUND_ROBIN, True),
        Scenario(ROUTE_KEY, False),
        Scenario(ROUTE_KEY, True),
        Scenario(BODY, True),
        Scenario(ROUTE_KEY, False, replace_after=0.4),
        Scenario(ROUTE_KEY, True, replace_after=0.4),
    ]
