"""`reame bench --cluster`, part (a): what a replica that never saw a 1.5k-token system prompt
pays for it: computed cold, restored from the shared tier (another replica computed it), from
its own disk (after a restart), reused in place (the slot still holds it) and restored from its
RAM (once other prompts took the slots), with the bytes moved and the time of each stage as the
replica's own counters give them. Two replicas and a redis-server on 127.0.0.1."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from reame_bench.cluster_client import ChatClient, Counters
from reame_bench.cluster_processes import RedisProcess
from reame_bench.load_target import first_model
from reame_bench.serve_process import ServeProcess
from reame_bench.targets import Messages
from reame_bench.workloads import filler_text

SYSTEM_WORDS = 1500
ANSWER_TOKENS = 2  # only the time to first token matters here
TIERS = ("cold", "shared", "disk", "slot", "ram")


@dataclass(frozen=True, slots=True)
class Stage:
    ttft: float
    prompt_tokens: int
    cached_tokens: int
    source: str  # what the replica's lookup found: ram, disk, shared or miss
    bytes_moved: float  # stored bytes read back (disk or shared)
    lookup: float  # the shared tier's listing, one round trip
    fetch: float  # the stored bytes read
    decode: float  # decompressed and checked
    restore: float  # put into the context

    @property
    def rest(self) -> float:
        """What the first token cost beyond loading the prefix: the prompt's uncached tail,
        the first token's step, templating and HTTP."""
        return self.ttft - self.lookup - self.fetch - self.decode - self.restore


def stage_chat(run: int, question: int) -> Messages:
    system = f"Answer in one short sentence. {filler_text(seed=4100 + run, num_words=SYSTEM_WORDS)}"
    asked = f"Question {question}: {filler_text(seed=5100 + 10 * run + question, num_words=6)}"
    return [{"role": "system", "content": system}, {"role": "user", "content": asked}]


def other_chat(run: int, k: int) -> Messages:
    text = filler_text(seed=6100 + 10 * run + k, num_words=80)
    return [{"role": "user", "content": f"Summarize: {text}"}]


async def measured(client: ChatClient, base: str, messages: Messages) -> Stage:
    before = Counters.read(base)
    timeline, _ = await client.ask(base, messages, ANSWER_TOKENS)
    after = Counters.read(base)
    found = [
        r
        for r in ("shared", "disk", "ram", "miss")
        if after.since(before, "reame_prefix_cache_lookups_total", result=r) > 0
    ]
    source = found[0] if found else "none"
    tier = {"tier": source} if source in ("disk", "shared") else None

    def load(stage: str) -> float:
        if tier is None:
            return 0.0
        return after.since(before, "reame_prefix_cache_load_seconds_sum", stage=stage, **tier)

    return Stage(
        ttft=timeline.ttft,
        prompt_tokens=timeline.num_prompt_tokens,
        cached_tokens=timeline.num_cached_tokens,
        source=source,
        bytes_moved=after.since(before, "reame_prefix_cache_load_bytes_total", **tier)
        if tier
        else 0.0,
        lookup=after.since(before, "reame_shared_store_seconds_sum", op="lookup"),
        fetch=load("fetch"),
        decode=load("decode"),
        restore=after.since(before, "reame_prefix_cache_restore_seconds_sum"),
    )


def wait_until_shared(writer: ServeProcess, timeout: float = 60) -> None:
    """Until every snapshot `writer` took was sent to the tier, one put apiece (its writer waits
    for a quiet spell), but those a longer state queued after them holds (its blob serves them).
    NOTE: not the tier's count of blobs, which earlier runs fill too."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counters = Counters.read(writer.url)
        taken = counters.total("reame_prefix_cache_snapshots_total") - counters.total(
            "reame_prefix_cache_writes_covered_total"
        )
        if counters.total("reame_shared_store_seconds_count", op="put") >= taken:
            return
        time.sleep(0.2)
    raise TimeoutError("the writer's snapshots did not reach the shared tier")


async def bench_stages(
    args: list[str],
    settings: dict[str, str],
    runs: int,
    parallel: int,
    log: Callable[[str], None],
) -> dict[str, list[Stage]]:
    """Per tier, one Stage a run; each run a system prompt no replica saw. `parallel`: the
    replicas' slots."""
    store = RedisProcess("1gb")
    shared = {**settings, "shared_store": store.url, "shared_store_secret": secrets.token_hex(32)}
    writer = reader = None
    out: dict[str, list[Stage]] = {t: [] for t in TIERS}
    try:
        writer = ServeProcess(args, shared)
        reader = ServeProcess(args, shared)
        client = ChatClient(first_model(writer.url, {}))
        try:
            for run in range(runs):
                log(f"stages: run {run + 1} of {runs}")
                out["cold"].append(await measured(client, writer.url, stage_chat(run, 0)))
                wait_until_shared(writer)
                out["shared"].append(await measured(client, reader.url, stage_chat(run, 1)))
                reader.stop()  # its hit is on its disk when it has stopped (the writer drains)
                # NOTE: no preload, which would have it in RAM again: this stage times the disk
                restarted = {**reader.settings, "prefix_cache_preload": "false"}
                reader = ServeProcess(
                    reader.args, restarted, port=reader.port, state_dir=reader.state_dir
                )
                out["disk"].append(await measured(client, reader.url, stage_chat(run, 2)))
                out["slot"].append(await measured(client, reader.url, stage_chat(run, 3)))
                for k in range(parallel):  # NOTE: each takes a slot, the last the prompt's own
                    await client.ask(reader.url, other_chat(run, k), ANSWER_TOKENS)
                out["ram"].append(await measured(client, reader.url, stage_chat(run, 4)))
        finally:
            await client.aclose()
    finally:
        for process in (writer, reader):
            if process is not None:
                process.stop()
        store.stop()
    return out
