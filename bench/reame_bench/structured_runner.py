"""`reame bench --structured`'s runner: OpenAI-compatible servers (a running Reame,
llama-server) and/or `reame serve` children it starts with forced runs off and on, sent the
seeded workloads one request at a time, taking turns per request so that they share the
machine's noise; Reame's /metrics read before and after each workload."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from reame_bench.http_runner import rotated
from reame_bench.load_target import LoadTarget, ServeOptions, first_model
from reame_bench.serve_process import ServeProcess, read_metrics
from reame_bench.sse_reader import BenchTargetError, ChunkTally, SseDecoder, _has_content
from reame_bench.structured_grade import Answer, ToolCall, grade
from reame_bench.structured_report import (
    Result,
    StructuredFigures,
    metrics_delta,
    summarize,
)
from reame_bench.structured_workload import MAX_TOKENS, WORKLOADS, Item, workload_items
from reame_bench.targets import Timeline, api_base

FORCED_OFF = "forced-off"
FORCED_ON = "forced-on"


class StreamFold:
    """A chat completion stream's chunks into an Answer: content, usage and timing as the other
    benches read them (ChunkTally), plus finish_reason and tool calls; a chunk carrying a piece
    of a tool call times a token as a chunk carrying content does."""

    def __init__(self, timeline: Timeline) -> None:
        self.tally = ChunkTally(timeline)
        self.finish_reason: str | None = None
        self.calls: dict[int, ToolCall] = {}

    @property
    def is_done(self) -> bool:
        return self.tally.is_done

    def add(self, payload: str, now: float) -> None:
        if self.tally.is_done:
            return
        self.tally.add(payload, now)
        if self.tally.is_done:
            return
        chunk = json.loads(payload)  # NOTE: the tally has checked it is a JSON object
        has_call = False
        for choice in chunk.get("choices") or ():
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            for delta in (choice.get("delta") or {}).get("tool_calls") or ():
                has_call |= self._add_call(delta)
        if has_call and not _has_content(chunk):
            t = self.tally.timeline
            if not self.tally.content_chunks:
                t.first = now
            self.tally.content_chunks += 1
            t.token_times.append(now)

    def _add_call(self, delta: dict[str, Any]) -> bool:
        index = delta.get("index")
        call = self.calls.setdefault(
            index if isinstance(index, int) else len(self.calls), ToolCall("", "")
        )
        function = delta.get("function") or {}
        name, arguments = function.get("name") or "", function.get("arguments") or ""
        if name and name != call.name:  # NOTE: a name comes once; one sent again is not added
            call.name += name
        call.arguments += arguments
        return bool(name or arguments)

    def finish(self, now: float) -> Answer:
        timeline = self.tally.finish(now)
        calls = [self.calls[k] for k in sorted(self.calls)]
        return Answer(timeline, self.finish_reason, calls)


class StructuredTarget:
    """One server, over one pooled httpx client; `process`: the `reame serve` this bench
    started, stopped on close."""

    def __init__(
        self,
        name: str,
        base: str,
        model: str,
        detail: str,
        headers: dict[str, str],
        process: ServeProcess | None = None,
    ) -> None:
        self.name, self.base, self.model, self.detail = name, base, model, detail
        self.headers, self.process = headers, process
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(30.0, read=600.0))

    @classmethod
    def open(cls, url: str, name: str, api_key: str | None) -> StructuredTarget:
        base = api_base(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        model = first_model(base, headers)
        return cls(name, base, model, f"{base} (model {model})", headers)

    @classmethod
    def start(cls, name: str, options: ServeOptions) -> StructuredTarget:
        started = LoadTarget.start(options)
        assert started.process is not None
        d = started.detail
        detail = (
            f"{d['server']}, model {d['model']}, parallel {d['parallel']}, context "
            f"{d['context_length']}, settings {options.extra}"
        )
        return cls(name, started.base, started.model, detail, {}, started.process)

    def chat(self, body: dict[str, Any]) -> tuple[Answer, str]:
        """The answer, and '' or the HTTP error the server answered with."""
        url = f"{self.base}/v1/chat/completions"
        fold = StreamFold(Timeline(time.perf_counter()))
        try:
            with self._client.stream("POST", url, json=body) as response:
                if response.status_code >= 400:
                    text = response.read().decode(errors="replace").strip()
                    return fold.finish(time.perf_counter()), (
                        f"HTTP {response.status_code}: {text[:300]}"
                    )
                decoder = SseDecoder()
                for text in response.iter_text():
                    now = time.perf_counter()
                    for payload in decoder.feed(text):
                        fold.add(payload, now)
                    if fold.is_done:
                        break
                else:
                    for payload in decoder.finish():
                        fold.add(payload, time.perf_counter())
        except httpx.HTTPError as exc:
            raise BenchTargetError(f"{self.name}: POST {url}: {type(exc).__name__}: {exc}") from exc
        return fold.finish(time.perf_counter()), ""

    def metrics(self) -> dict[str, float] | None:
        """Its /metrics, None when it exposes none (llama-server without --metrics)."""
        try:
            return read_metrics(self.base, self.headers)
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        self._client.close()
        if self.process is not None:
            self.process.stop()


def run_workload(
    targets: Sequence[StructuredTarget],
    items: Sequence[Item],
    warm_up: Item,
    log: Callable[[str], None],
) -> dict[str, Result]:
    """Every target answers `warm_up` (which pages in the weights, compiles the grammar and
    caches the shared prefix), then every item in turn; /metrics around the items alone."""
    workload = items[0].workload
    for target in targets:
        target.chat(warm_up.body(target.model))
    before = {t.name: t.metrics() for t in targets}
    answers: dict[str, list[tuple[Answer, str]]] = {t.name: [] for t in targets}
    for item in items:
        log(f"{workload}: request {item.index + 1}/{len(items)}")
        # NOTE: whoever goes first meets a machine that has just been idle: take turns
        for target in rotated(targets, item.index):  # type: ignore[arg-type]
            answer, error = target.chat(item.body(target.model))
            if error and not any(e for _, e in answers[target.name]):
                log(f"{target.name}: {workload}: {error}")
            answers[target.name].append((answer, error))
    out = {}
    for target in targets:
        pairs = answers[target.name]
        out[target.name] = Result(
            [a for a, _ in pairs],
            [grade(item, a) for item, (a, _) in zip(items, pairs, strict=True)],
            metrics_delta(before[target.name], target.metrics()),
            [e for _, e in pairs],
        )
    return out


def bench_structured(
    targets: Sequence[StructuredTarget],
    count: int,
    seed: int,
    log: Callable[[str], None],
    workloads: Sequence[str] = WORKLOADS,
) -> tuple[dict[str, Any], StructuredFigures]:
    results = {}
    for workload in workloads:
        log(f"{workload}: {count} requests a target, {len(targets)} targets")
        items = workload_items(workload, seed, count)
        warm_up = workload_items(workload, seed - 1, 1)[0]
        results[workload] = run_workload(targets, items, warm_up, log)
    header = {
        **{f"target {t.name}": t.detail for t in targets},
        "requests a workload": count,
        "max_tokens": ", ".join(f"{w} {MAX_TOKENS[w]}" for w in workloads),
        "seed": seed,
        "sent": "one at a time, streamed, temperature 0, speculation off",
    }
    return header, summarize(results, [t.name for t in targets])
