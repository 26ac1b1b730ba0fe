"""`reame bench --url`: the same seeded workloads against OpenAI-compatible servers (a running
Reame, llama.cpp's llama-server, Ollama) and, optionally, Reame's in-process engine, measured in
alternation so every target sees the same noisy machine, with ratios against the first target.

Prompts are sized in words, not tokens (a server's tokenizer is out of reach): the filler words
are common English words of about one token each. Prefill rates use the prompt token count the
server reports in its usage chunk when it sends one.
"""

from __future__ import annotations

import asyncio
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reame.errors import ConfigError
from reame_bench.sse_reader import BenchTargetError
from reame_bench.targets import (
    HttpTarget,
    InProcessTarget,
    Messages,
    Target,
    Timeline,
    target_names,
)
from reame_bench.workloads import filler_text, topics

if TYPE_CHECKING:
    from reame.runtime import Runtime

CONCURRENCY = (1, 2, 4)
WARM_UP_TOKENS = 4
TTFT = "time to first token s"
PREFILL = "prefill tok/s"
SCALING = "x4 over x1"


def aggregate_key(n: int) -> str:
    return f"aggregate decode tok/s x{n}"


METRICS = (TTFT, PREFILL, *(aggregate_key(n) for n in CONCURRENCY), SCALING)


def aggregate_tps(timelines: Sequence[Timeline]) -> float:
    """Tokens per second while every stream was decoding: from the last stream's first token
    to the first stream's last. Prefill, and which stream a server starts first, are left to
    the time to first token (a server that starts one stream before the others' prefill would
    otherwise have that prefill counted as slow decoding). For one stream: its decode rate."""
    start = max(t.first for t in timelines)
    end = min(t.last for t in timelines)
    tokens = sum(t.tokens_between(start, end) for t in timelines)
    if end <= start or tokens <= 0:
        raise BenchTargetError(
            "the streams never decoded together after their first tokens: raise --max-tokens, "
            "or the server stopped early (does it honour ignore_eos?)"
        )
    return tokens / (end - start)


def prefill_tps(timeline: Timeline, approx_prompt_tokens: int) -> float:
    return (timeline.num_prompt_tokens or approx_prompt_tokens) / timeline.ttft


@dataclass(slots=True)
class HttpFigures:
    """Medians per metric and target; ratios: median of per-run target/first, for the others."""

    targets: list[str]
    rows: dict[str, dict[str, float]] = field(default_factory=dict)
    ratios: dict[str, dict[str, float]] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def baseline(self) -> str:
        return self.targets[0]


Samples = dict[str, dict[str, list[float]]]  # metric -> target -> one value per run


def add_scaling(samples: Samples) -> None:
    """x4 over x1 per target and run: how much a target gains from decoding streams together."""
    one, four = samples[aggregate_key(1)], samples[aggregate_key(4)]
    samples[SCALING] = {
        name: [b / a for a, b in zip(one[name], four[name], strict=True)] for name in one
    }


def summarize(samples: Samples, targets: Sequence[str]) -> HttpFigures:
    """Ratios pair values of the same run: the machine's drift between runs cancels out."""
    figures = HttpFigures(list(targets))
    base = targets[0]
    for metric, by_target in samples.items():
        figures.rows[metric] = {n: statistics.median(by_target[n]) for n in targets}
        if any(b == 0 for b in by_target[base]):
            continue  # a count the first target has none of (reused tokens): no ratio
        figures.ratios[metric] = {
            n: statistics.median(
                [v / b for v, b in zip(by_target[n], by_target[base], strict=True)]
            )
            for n in targets[1:]
        }
    return figures


def exact_check(name: str) -> str:
    return f"{name}: every request generated exactly max_tokens tokens"


def user(content: str) -> Messages:
    return [{"role": "user", "content": content}]


def decode_chats(seed: int, run: int) -> list[Messages]:
    """The decode workloads of one run; a run-specific opening makes every run's prompts new,
    so no server decodes them behind a warm prompt cache (llama-server keeps each slot's KV and
    would skip their prefill, which the aggregate span would then leave out for it alone)."""
    opening = filler_text(seed=seed + 1000 + run, num_words=3).capitalize()
    return [user(f"{opening}. {q}") for q in topics(max(CONCURRENCY))]


def rotated(targets: Sequence[Target], run: int) -> list[Target]:
    # whoever goes first in a workload meets a machine that has just been idle or busy: take
    # turns
    k = run % len(targets)
    return [*targets[k:], *targets[:k]]


async def bench_targets(
    targets: Sequence[Target],
    runs: int,
    prompt_tokens: int,
    max_tokens: int,
    log: Callable[[str], None],
    seed: int,
) -> HttpFigures:
    """`seed` picks the prompts: a new one for each invocation keeps a long-running server's
    prompt cache (llama-server keeps one in RAM across slots) from answering a "cold" prompt
    that an earlier bench sent."""
    names = [t.name for t in targets]
    samples: Samples = {m: {n: [] for n in names} for m in METRICS if m != SCALING}
    exact = dict.fromkeys(names, True)

    def note(target: Target, timelines: Sequence[Timeline], expected: int) -> None:
        if any(t.num_tokens != expected for t in timelines):
            exact[target.name] = False

    log("warm-up (page in the weights, open the connections)")
    warm_prompt = user(filler_text(seed=seed - 1, num_words=prompt_tokens))
    for target in targets:
        await target.stream(warm_prompt, WARM_UP_TOKENS)
        await asyncio.gather(*(target.stream(c, WARM_UP_TOKENS) for c in decode_chats(seed, -1)))
    for run in range(runs):
        order = rotated(targets, run)
        log(f"run {run + 1}/{runs}: prefill")
        # NOTE: a new filler seed per run: a server with a prompt cache (llama-server keeps each
        # slot's KV) would otherwise serve a repeated prompt warm, so every run is cold
        prompt = user(filler_text(seed=seed + run, num_words=prompt_tokens))
        for target in order:
            t = await target.stream(prompt, 1)
            note(target, [t], 1)
            samples[TTFT][target.name].append(t.ttft)
            samples[PREFILL][target.name].append(prefill_tps(t, prompt_tokens))
        log(f"run {run + 1}/{runs}: decode")
        chats = decode_chats(seed, run)
        for n in CONCURRENCY:
            for target in order:
                group = await asyncio.gather(*(target.stream(c, max_tokens) for c in chats[:n]))
                note(target, group, max_tokens)
                try:
                    samples[aggregate_key(n)][target.name].append(aggregate_tps(group))
                except BenchTargetError as exc:
                    raise BenchTargetError(f"{target.name}: {exc}") from exc
    add_scaling(samples)
    figures = summarize(samples, names)
    figures.checks = {exact_check(n): ok for n, ok in exact.items()}
    return figures


def bench_header(
    targets: Sequence[Target], runs: int, prompt_tokens: int, max_tokens: int, seed: int
) -> dict[str, Any]:
    return {
        **{f"target {t.name}": t.detail for t in targets},
        "runs": runs,
        "prompt_tokens": prompt_tokens,
        "max_tokens": max_tokens,
        "prompt_seed": seed,
    }


def check_sizes(runs: int, prompt_tokens: int, max_tokens: int) -> None:
    if runs < 1 or prompt_tokens < 1:
        raise ConfigError("--runs and --prompt-tokens must be at least 1")
    if max_tokens < 2:
        raise ConfigError("--max-tokens must be at least 2: decode is timed after the first token")


async def bench_servers(
    urls: Sequence[str],
    names: Sequence[str],
    api_key: str | None,
    runtime: Runtime | None,
    runs: int,
    prompt_tokens: int,
    max_tokens: int,
    log: Callable[[str], None],
    seed: int | None = None,
) -> tuple[dict[str, Any], HttpFigures]:
    """The in-process target, when given, goes first: the others' ratios then read HTTP over
    in-process. Without a seed, a new one (prompts no server has seen)."""
    check_sizes(runs, prompt_tokens, max_tokens)
    seed = seed if seed is not None else random.SystemRandom().randrange(1 << 30)
    url_names = target_names(urls, names, in_process=runtime is not None)
    targets: list[Target] = [InProcessTarget(runtime)] if runtime is not None else []
    try:
        for url, name in zip(urls, url_names, strict=True):
            targets.append(await HttpTarget.open(url, name, api_key))
        figures = await bench_targets(targets, runs, prompt_tokens, max_tokens, log, seed)
    finally:
        for target in targets:
            await target.aclose()
    return bench_header(targets, runs, prompt_tokens, max_tokens, seed), figures
