"""How `reame bench --cluster` talks to replicas and HAProxy: a streamed greedy chat timed as a
Timeline, with the replica that answered (HAProxy's response header), and a replica's counters
read before and after a request."""

from __future__ import annotations

import time
from collections.abc import Mapping

import httpx

from reame_bench.cluster_processes import SERVER_HEADER
from reame_bench.serve_process import read_metrics
from reame_bench.sse_reader import BenchTargetError, read_stream
from reame_bench.targets import Messages, Timeline, chat_request_body


class ChatClient:
    def __init__(self, model: str) -> None:
        self.model = model
        # a long prompt queued behind others on a 1-thread replica can take minutes
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=600.0))

    async def ask(
        self,
        base: str,
        messages: Messages,
        max_tokens: int,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[Timeline, str]:
        """The answer's timeline and the server HAProxy says answered ("" straight to one)."""
        body = chat_request_body(self.model, messages, max_tokens)
        url = f"{base}/v1/chat/completions"
        timeline = Timeline(time.perf_counter())
        try:
            async with self._client.stream("POST", url, json=body, headers=headers) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode(errors="replace")
                    raise BenchTargetError(f"POST {url}: HTTP {response.status_code}: {text[:300]}")
                await read_stream(response.aiter_text(), timeline)
                return timeline, response.headers.get(SERVER_HEADER, "")
        except httpx.HTTPError as exc:
            raise BenchTargetError(f"POST {url}: {type(exc).__name__}: {exc}") from exc

    async def aclose(self) -> None:
        await self._client.aclose()


class Counters:
    """A replica's /metrics samples, to subtract one reading from a later one."""

    def __init__(self, samples: Mapping[str, float]) -> None:
        self.samples = dict(samples)

    @classmethod
    def read(cls, base: str) -> Counters:
        return cls(read_metrics(base))

    def total(self, name: str, **labels: str) -> float:
        """The sum of `name`'s series that carry every one of `labels`."""
        wanted = [f'{k}="{v}"' for k, v in labels.items()]
        out = 0.0
        for series, value in self.samples.items():
            bare, _, rest = series.partition("{")
            if bare == name and all(w in rest for w in wanted):
                out += value
        return out

    def since(self, earlier: Counters, name: str, **labels: str) -> float:
        return self.total(name, **labels) - earlier.total(name, **labels)
