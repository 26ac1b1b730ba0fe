"""Reading a chat completion's server-sent event stream, as it arrives, into its Timeline."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from reame.errors import ReameError

if TYPE_CHECKING:
    from reame_bench.targets import Timeline


class BenchTargetError(ReameError):
    """A target that cannot be benched: unreachable, refusing, or streaming something else."""

    code = "bench_target_failed"


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
        if choice.get("text"):  # a completion's chunk
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
        for choice in chunk.get("choices") or ():
            self.timeline.text += (choice.get("delta") or {}).get("content") or ""
            self.timeline.text += choice.get("text") or ""
        if _has_content(chunk):
            if not self.content_chunks:
                self.timeline.first = now
            self.content_chunks += 1
            self.timeline.token_times.append(now)
        usage = chunk.get("usage")
        if usage:
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            details = usage.get("prompt_tokens_details") or {}
            self.timeline.num_cached_tokens = int(details.get("cached_tokens") or 0)
            drafts = usage.get("completion_tokens_details") or {}
            if "accepted_prediction_tokens" in drafts:
                self.timeline.num_accepted_drafts = int(drafts["accepted_prediction_tokens"] or 0)
        timings = chunk.get("timings")  # llama-server's own, on its last chunk
        if isinstance(timings, dict):
            if not self.timeline.num_cached_tokens:
                self.timeline.num_cached_tokens = int(timings.get("cache_n") or 0)
            if "draft_n_accepted" in timings:  # NOTE: sent only when it drafted
                self.timeline.num_accepted_drafts = int(timings["draft_n_accepted"] or 0)

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
    return await fold_stream(chunks, ChunkTally(timeline), clock)


class Fold(Protocol):
    """What a stream's chunks are folded into (a ChunkTally, or one that keeps more)."""

    @property
    def is_done(self) -> bool: ...

    def add(self, payload: str, now: float) -> None: ...

    def finish(self, now: float) -> Any: ...


F = TypeVar("F", bound=Fold)


async def fold_stream(
    chunks: AsyncIterable[str], fold: F, clock: Callable[[], float] = time.perf_counter
) -> Any:
    """Folds an SSE body's events up to `data: [DONE]` or its end; `fold.finish()`'s result."""
    decoder = SseDecoder()
    async for text in chunks:
        now = clock()
        for payload in decoder.feed(text):
            fold.add(payload, now)
        if fold.is_done:
            return fold.finish(now)
    now = clock()
    for payload in decoder.finish():
        fold.add(payload, now)
    return fold.finish(now)
