"""`reame bench --url`: the same seeded workloads against OpenAI-compatible servers (a running
Reame, llama.cpp's llama-server, Ollama) and, optionally, Reame's in-process engine, measured in
alternation so every target sees the same noisy machine, with ratios against the first target.

Prompts are sized in words, not tokens (a server's tokenizer is out of reach): the filler words
are common English words of about one token each. Prefill rates use the prompt token count the
server reports in its usage chunk when it sends one.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httpx

from reame.bench.workloads import filler_text, topics
from reame.engine.request import FinishEvent, TokenEvent
from reame.errors import ConfigError, ReameError

if TYPE_CHECKING:
    from reame.runtime import Runtime

CONCURRENCY = (1, 2, 4)
PROMPT_SEED = 7
WARM_UP_TOKENS = 4
TTFT = "time to first token s"
PREFILL = "prefill tok/s"
SCALING = "x4 over x1"
IN_PROCESS = "in-process"


def aggregate_key(n: int) -> str:
    return f"aggregate decode tok/s x{n}"


METRICS = (TTFT, PREFILL, *(aggregate_key(n) for n in CONCURRENCY), SCALING)
Messages = list[dict[str, Any]]


class BenchTargetError(ReameError):
    """A target that cannot be benched: unreachable, refusing, or streaming something else."""

    code = "bench_target_failed"


@dataclass(slots=True)
class Timeline:
    """One request as the client saw it. `first`: the first chunk carrying content."""

    submitted: float
    first: float = 0.0
    finished: float = 0.0
    num_tokens: int = 0
    num_prompt_tokens: int = 0  # 0 when the server did not say

    @property
    def ttft(self) -> float:
        return self.first - self.submitted


def aggregate_tps(timelines: Sequence[Timeline]) -> float:
    """Tokens after each first token over the span in which the streams decoded together; for
    one stream this is its single-stream decode rate."""
    span = max(t.finished for t in timelines) - min(t.first for t in timelines)
    tokens = sum(t.num_tokens - 1 for t in timelines)
    if span <= 0 or tokens <= 0:
        raise BenchTargetError(
            "a stream produced no tokens after its first: raise --max-tokens, or the server "
            "stopped early (does it honour ignore_eos?)"
        )
    return tokens / span


def prefill_tps(timeline: Timeline, approx_prompt_tokens: int) -> float:
    return (timeline.num_prompt_tokens or approx_prompt_tokens) / timeline.ttft


# --- server-sent events ---------------------------------------------------------------------

_EOL = re.compile(r"\r\n|\r|\n")


class SseDecoder:
    """Server-sent events from text as it arrives, split anywhere across reads: returns the data
    of each complete event (several data lines joined by newlines); comments are dropped."""

    __slots__ = ("_buffer", "_data")

    def __init__(self) -> None:
        self._buffer = ""
        self._data: list[str] = []

    def feed(self, text: str) -> list[str]:
        self._buffer += text
        events: list[str] = []
        start = 0
        for match in _EOL.finditer(self._buffer):
            # a "\r" that ends the buffer may be the first half of a "\r\n" still on the wire
            if match.group() == "\r" and match.end() == len(self._buffer):
                break
            self._line(self._buffer[start : match.start()], events)
            start = match.end()
        self._buffer = self._buffer[start:]
        return events

    def finish(self) -> list[str]:
        """At the end of the stream: an unterminated last event is kept, not dropped."""
        events: list[str] = []
        for line in (self._buffer.rstrip("\r"), ""):
            self._line(line, events)
        self._buffer = ""
        return events

    def _line(self, line: str, events: list[str]) -> None:
        if not line:
            if self._data:
                events.append("\n".join(self._data))
                self._data.clear()
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value.removeprefix(" "))


def _parse_chunk(payload: str) -> dict[str, Any]:
    try:
        chunk = json.loads(payload)
    except json.JSONDecodeError:
        chunk = None
    if not isinstance(chunk, dict):
        raise BenchTargetError(
            f"the stream sent a chunk that is not a JSON object: {payload[:200]!r}"
        )
    return chunk


def _has_content(chunk: dict[str, Any]) -> bool:
    # reasoning models stream their thinking as reasoning_content (llama-server) or reasoning
    # (Ollama): those are generated tokens too
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"):
            return True
    return False


@dataclass(slots=True)
class ChunkTally:
    """Folds a chat completion stream's chunks into its Timeline."""

    timeline: Timeline
    content_chunks: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    is_done: bool = False

    def add(self, payload: str, now: float) -> None:
        if self.is_done:
            return
        if payload.strip() == "[DONE]":
            self.is_done = True
            return
        chunk = _parse_chunk(payload)
        if chunk.get("error"):
            raise BenchTargetError(f"the server reported an error mid-stream: {chunk['error']}")
        if _has_content(chunk):
            if not self.content_chunks:
                self.timeline.first = now
            self.content_chunks += 1
        usage = chunk.get("usage")
        if usage:
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)

    def finish(self, now: float) -> Timeline:
        t = self.timeline
        t.finished = now
        # a stream whose text all came at once at the end has its first content there
        t.first = t.first or now
        # without usage, one content chunk per token is what llama-server and Ollama send
        t.num_tokens = (
            self.completion_tokens if self.completion_tokens is not None else self.content_chunks
        )
        t.num_prompt_tokens = self.prompt_tokens or 0
        return t


async def read_stream(
    chunks: AsyncIterable[str], timeline: Timeline, clock: Callable[[], float] = time.perf_counter
) -> Timeline:
    """Reads a chat completion's SSE body (text as it arrives) up to `data: [DONE]` or its end."""
    decoder, tally = SseDecoder(), ChunkTally(timeline)
    async for text in chunks:
        now = clock()
        for payload in decoder.feed(text):
            tally.add(payload, now)
        if tally.is_done:
            return tally.finish(now)
    now = clock()
    for payload in decoder.finish():
        tally.add(payload, now)
    return tally.finish(now)


# --- targets --------------------------------------------------------------------------------


class Target(Protocol):
    name: str
    detail: str  # what it is, for the report's header

    async def stream(self, messages: Messages, max_tokens: int) -> Timeline: ...

    async def aclose(self) -> None: ...


def api_base(url: str) -> str:
    """`host:port`, `http://host:port/` and `http://host:port/v1` (OpenAI clients' base URL)
    all name the same server."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url.removesuffix("/v1")


def default_name(url: str) -> str:
    return urlsplit(api_base(url)).netloc or url


def target_names(urls: Sequence[str], names: Sequence[str], in_process: bool) -> list[str]:
    """Names of the URL targets: --name in order, then host:port."""
    if len(names) > len(urls):
        raise ConfigError(f"{len(names)} --name for {len(urls)} --url: give at most one per --url")
    out = [*names, *(default_name(u) for u in urls[len(names) :])]
    taken = [IN_PROCESS, *out] if in_process else out
    if len(set(taken)) != len(taken):
        raise ConfigError(f"target names must differ, got {', '.join(taken)}: use --name")
    return out


def chat_request_body(model: str, messages: Messages, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        # not OpenAI's, but llama-server and Reame accept it: every request generates exactly
        # max_tokens tokens, so all targets do the same work
        "ignore_eos": True,
    }


async def _check_status(response: httpx.Response, what: str) -> None:
    if response.status_code >= 400:
        body = (await response.aread()).decode(errors="replace").strip()
        raise BenchTargetError(f"{what}: HTTP {response.status_code}: {body[:300]}")


class HttpTarget:
    """An OpenAI-compatible server, over one pooled httpx client."""

    def __init__(self, client: httpx.AsyncClient, name: str, base: str, model: str) -> None:
        self._client = client
        self.name, self.base, self.model = name, base, model
        self.detail = f"{base} (model {model})"

    @classmethod
    async def open(cls, url: str, name: str, api_key: str | None = None) -> HttpTarget:
        """Connects and takes the first model the server lists."""
        base = api_base(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # a long prompt on a busy CPU can keep the first chunk back for minutes
        timeout = httpx.Timeout(30.0, read=600.0)
        client = httpx.AsyncClient(headers=headers, timeout=timeout)
        try:
            response = await client.get(f"{base}/v1/models")
            await _check_status(response, f"{name}: GET {base}/v1/models")
            data = response.json().get("data") or []
            if not data:
                raise BenchTargetError(f"{name}: {base}/v1/models lists no model")
            return cls(client, name, base, str(data[0]["id"]))
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            await client.aclose()
            raise BenchTargetError(f"{name}: {base}/v1/models: {_describe(exc)}") from exc
        except BaseException:
            await client.aclose()
            raise

    async def stream(self, messages: Messages, max_tokens: int) -> Timeline:
        body = chat_request_body(self.model, messages, max_tokens)
        url = f"{self.base}/v1/chat/completions"
        timeline = Timeline(time.perf_counter())
        try:
            async with self._client.stream("POST", url, json=body) as response:
                await _check_status(response, f"{self.name}: POST {url}")
                await read_stream(response.aiter_text(), timeline)
        except httpx.HTTPError as exc:
            raise BenchTargetError(f"{self.name}: POST {url}: {_describe(exc)}") from exc
        return timeline

    async def aclose(self) -> None:
        await self._client.aclose()


def _describe(exc: BaseException) -> str:
    # some httpx errors (timeouts) have an empty message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class InProcessTarget:
    """Reame's engine in this process, through the same Service the HTTP layer uses."""

    def __init__(self, runtime: Runtime, name: str = IN_PROCESS) -> None:
        self._runtime = runtime
        self.name = name
        tuned = runtime.tuned
        self.detail = (
            f"Reame's engine in this process ({runtime.model.name}, {tuned.threads} threads, "
            f"parallel {tuned.parallel}, context {tuned.context_length})"
        )

    async def stream(self, messages: Messages, max_tokens: int) -> Timeline:
        service = self._runtime.service
        # the clock starts before templating and tokenizing: a server does both inside its
        # time to first token too
        timeline = Timeline(time.perf_counter())
        prompt = service.chat_prompt(messages)
        params = service.sampling(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        timeline.num_prompt_tokens = len(prompt)
        async for event in service.astream(prompt, params):
            now = time.perf_counter()
            if isinstance(event, TokenEvent):
                if event.text and not timeline.first:
                    timeline.first = now
            elif isinstance(event, FinishEvent):
                if event.reason == "error":
                    raise BenchTargetError(f"{self.name}: {event.error}")
                timeline.finished = now
                timeline.first = timeline.first or now
                timeline.num_tokens = event.num_completion_tokens
        return timeline

    async def aclose(self) -> None:
        """The runtime belongs to the caller."""


# --- the bench ------------------------------------------------------------------------------


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
) -> HttpFigures:
    names = [t.name for t in targets]
    samples: Samples = {m: {n: [] for n in names} for m in METRICS if m != SCALING}
    exact = dict.fromkeys(names, True)
    chats = [user(q) for q in topics(max(CONCURRENCY))]

    def note(target: Target, timelines: Sequence[Timeline], expected: int) -> None:
        if any(t.num_tokens != expected for t in timelines):
            exact[target.name] = False

    log("warm-up (page in the weights, open the connections)")
    warm_prompt = user(filler_text(seed=PROMPT_SEED - 1, num_words=prompt_tokens))
    for target in targets:
        await target.stream(warm_prompt, WARM_UP_TOKENS)
        await asyncio.gather(*(target.stream(c, WARM_UP_TOKENS) for c in chats))
    for run in range(runs):
        order = rotated(targets, run)
        log(f"run {run + 1}/{runs}: prefill")
        # NOTE: a new filler seed per run: a server with a prompt cache (llama-server keeps each
        # slot's KV) would otherwise serve a repeated prompt warm, so every run is cold
        prompt = user(filler_text(seed=PROMPT_SEED + run, num_words=prompt_tokens))
        for target in order:
            t = await target.stream(prompt, 1)
            note(target, [t], 1)
            samples[TTFT][target.name].append(t.ttft)
            samples[PREFILL][target.name].append(prefill_tps(t, prompt_tokens))
        log(f"run {run + 1}/{runs}: decode")
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
    targets: Sequence[Target], runs: int, prompt_tokens: int, max_tokens: int
) -> dict[str, Any]:
    return {
        **{f"target {t.name}": t.detail for t in targets},
        "runs": runs,
        "prompt_tokens": prompt_tokens,
        "max_tokens": max_tokens,
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
) -> tuple[dict[str, Any], HttpFigures]:
    """The in-process target, when given, goes first: the others' ratios then read HTTP over
    in-process."""
    check_sizes(runs, prompt_tokens, max_tokens)
    url_names = target_names(urls, names, in_process=runtime is not None)
    targets: list[Target] = [InProcessTarget(runtime)] if runtime is not None else []
    try:
        for url, name in zip(urls, url_names, strict=True):
            targets.append(await HttpTarget.open(url, name, api_key))
        figures = await bench_targets(targets, runs, prompt_tokens, max_tokens, log)
    finally:
        for target in targets:
            await target.aclose()
    return bench_header(targets, runs, prompt_tokens, max_tokens), figures


def run_bench(
    urls: Sequence[str],
    names: Sequence[str],
    api_key: str | None,
    runtime: Runtime | None,
    runs: int,
    prompt_tokens: int,
    max_tokens: int,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], HttpFigures]:
    return asyncio.run(
        bench_servers(urls, names, api_key, runtime, runs, prompt_tokens, max_tokens, log)
    )
