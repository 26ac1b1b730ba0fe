"""`reame bench` in process: Reame's engine side by side with a plain llama-cpp-python loop (in
a process of its own) on the same model, threads and context, run in alternation so both see
the same noisy machine."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reame.engine.request import Event, FinishEvent, GenerationRequest, TokenEvent
from reame.llama.context import ContextShape
from reame.runtime import Runtime
from reame.sampling import SamplingParams
from reame_bench.plain_loop import PlainLoopProcess
from reame_bench.workloads import filler_text, topics

CONCURRENCY = (1, 2, 4)
IDENTITY_CHECKS = {
    1: "greedy output identical to the plain loop, alone",
    4: "greedy output identical to the plain loop, in a batch of 4",
}


@dataclass(slots=True)
class Timing:
    """One request's timeline as the engine emitted it."""

    submitted: float
    first: float = 0.0
    finished: float = 0.0
    tokens: list[int] = field(default_factory=list)

    @property
    def decode_tps(self) -> float:
        return (len(self.tokens) - 1) / (self.finished - self.first)


def run_requests(
    runtime: Runtime, prompts: Sequence[list[int]], params: SamplingParams
) -> list[Timing]:
    """Submit all prompts at once and wait for all; timestamps are taken on the engine thread."""
    timings = [Timing(time.perf_counter()) for _ in prompts]
    left = threading.Semaphore(0)

    def sink_for(t: Timing) -> Callable[[Event], None]:
        def sink(event: Event) -> None:
            now = time.perf_counter()
            if isinstance(event, TokenEvent):
                if not t.tokens:
                    t.first = now
                t.tokens.append(event.token)
            elif isinstance(event, FinishEvent):
                t.finished = now
                left.release()

        return sink

    for prompt, t in zip(prompts, timings, strict=True):
        t.submitted = time.perf_counter()
        runtime.engine.submit(GenerationRequest(prompt, params), sink_for(t))
    for _ in prompts:
        left.acquire()
    return timings


def aggregate_tps(timings: Sequence[Timing]) -> float:
    """Tokens after each first token, over the span in which the sequences decoded together."""
    span = max(t.finished for t in timings) - min(t.first for t in timings)
    return sum(len(t.tokens) - 1 for t in timings) / span


@dataclass(slots=True)
class Figures:
    rows: dict[str, dict[str, float | None]] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def bench_engine(
    runtime: Runtime, runs: int, prompt_tokens: int, max_tokens: int, log: Callable[[str], None]
) -> Figures:
    with PlainLoopProcess(runtime.model_path) as plain_loop:
        return _bench_engine(runtime, plain_loop, runs, prompt_tokens, max_tokens, log)


def _bench_engine(
    runtime: Runtime,
    plain_loop: PlainLoopProcess,
    runs: int,
    prompt_tokens: int,
    max_tokens: int,
    log: Callable[[str], None],
) -> Figures:
    service, tuned = runtime.service, runtime.tuned
    plain_shape = ContextShape(tuned.context_length, tuned.batch_size, 1, tuned.threads)
    greedy = SamplingParams(
        temperature=0.0, max_tokens=max_tokens, ignore_eos=True, speculation="off"
    )
    long_prompt = service.text_prompt(filler_text(seed=7, num_words=prompt_tokens * 2))
    long_prompt = long_prompt[: min(prompt_tokens, tuned.context_length - max_tokens - 1)]
    chat = [service.chat.prompt([{"role": "user", "content": q}]) for q in topics(max(CONCURRENCY))]
    samples: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    checks = dict.fromkeys(IDENTITY_CHECKS.values(), True)

    def add(key: str, reame: float, plain: float | None) -> None:
        samples.setdefault(key, []).append(reame)
        if plain is not None:
            samples.setdefault(key + "/plain", []).append(plain)
            ratios.setdefault(key, []).append(reame / plain)

    log("warm-up (page in the weights, allocate compute buffers)")
    plain_loop.run(long_prompt, 4, plain_shape)
    run_requests(runtime, chat, greedy.model_copy(update={"max_tokens": 4}))
    for run in range(runs):
        log(f"run {run + 1}/{runs}: prefill")
        plain = plain_loop.run(long_prompt, 1, plain_shape)
        (t,) = run_requests(runtime, [long_prompt], greedy.model_copy(update={"max_tokens": 1}))
        add(
            "prefill tok/s",
            len(long_prompt) / (t.first - t.submitted),
            len(long_prompt) / plain.prefill_seconds,
        )
        add("time to first token s", t.first - t.submitted, plain.prefill_seconds)
        log(f"run {run + 1}/{runs}: decode")
        # NOTE: the plain loop runs before and after the engine's runs and its mean is the
        # baseline: the machine drifts (the same loop gave 80-131 tok/s in one minute here)
        before = plain_loop.run(chat[0], max_tokens, plain_shape, stop_at_end=False)
        timings = {n: run_requests(runtime, chat[:n], greedy) for n in CONCURRENCY}
        after = plain_loop.run(chat[0], max_tokens, plain_shape, stop_at_end=False)
        plain_tps = statistics.mean((len(p.tokens) - 1) / p.decode_seconds for p in (before, after))
        for n, group in timings.items():
            # NOTE: the plain loop runs one sequence at a time: its aggregate is its single rate
            add(f"aggregate decode tok/s x{n}", aggregate_tps(group), plain_tps)
            label = IDENTITY_CHECKS.get(n)
            if label and group[0].tokens != before.tokens:
                checks[label] = False
    figures = Figures(checks=checks)
    for key, values in samples.items():
        if key.endswith("/plain"):
            continue
        figures.rows[key] = {
            "reame": _median(values),
            "plain": _median(samples[key + "/plain"]) if key + "/plain" in samples else None,
            "ratio": _median(ratios[key]) if key in ratios else None,
        }
    one = samples["aggregate decode tok/s x1"]
    four = samples["aggregate decode tok/s x4"]
    figures.rows["x4 over x1 (reame)"] = {
        "reame": _median([b / a for a, b in zip(one, four, strict=True)]),
        "plain": None,
        "ratio": None,
    }
    return figures
