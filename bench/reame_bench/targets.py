"""The targets `reame bench --url` measures: an OpenAI-compatible server over HTTP, or Reame's
engine in this process; each streams a chat completion and times it as a Timeline."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httpx

from reame.engine.request import FinishEvent, TokenEvent
from reame.errors import ConfigError
from reame_bench.sse_reader import BenchTargetError, ChunkTally, Fold, fold_stream

if TYPE_CHECKING:
    from reame.runtime import Runtime

IN_PROCESS = "in-process"
Messages = list[dict[str, Any]]


@dataclass(slots=True)
class Timeline:
    """One request as the client saw it. `first`: the first chunk carrying content;
    `token_times`: when each chunk carrying content (or each token, in process) arrived, empty
    when unknown."""

    submitted: float
    first: float = 0.0
    finished: float = 0.0
    num_tokens: int = 0
    num_prompt_tokens: int = 0  # 0 when the server did not say
    token_times: list[float] = field(default_factory=list)
    text: str = ""  # the answer (multi-turn workloads send it back)
    num_cached_tokens: int = 0  # prompt tokens the server says it did not compute
    num_accepted_drafts: int | None = None  # drafted tokens kept; None when the server did not say

    @property
    def ttft(self) -> float:
        return self.first - self.submitted

    @property
    def last(self) -> float:
        """When the last token arrived."""
        return self.token_times[-1] if self.token_times else self.finished

    def tokens_between(self, start: float, end: float) -> float:
        """Tokens that arrived in (start, end]. The first chunk is taken as one token and the
        rest as sharing the others evenly (a server may send several tokens a chunk after the
        first); without per-chunk times, the tokens after the first are taken as spread evenly
        up to `finished`."""
        if self.token_times:
            later = sum(1 for t in self.token_times[1:] if start < t <= end)
            first = 1 if start < self.token_times[0] <= end else 0
            if len(self.token_times) == 1:
                return float(first * self.num_tokens)
            return first + later * (self.num_tokens - 1) / (len(self.token_times) - 1)
        span = self.finished - self.first
        if span <= 0:
            return 0.0
        overlap = max(0.0, min(end, self.finished) - max(start, self.first))
        return (self.num_tokens - 1) * overlap / span


class Target(Protocol):
    name: str
    detail: str  # what it is, for the report's header

    async def stream(
        self, messages: Messages | str, max_tokens: int, speculation: str = "off"
    ) -> Timeline:
        """A chat (messages) or a completion (a prompt string), streamed and timed."""
        ...

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


def chat_request_body(
    model: str, messages: Messages | str, max_tokens: int, speculation: str = "off"
) -> dict[str, Any]:
    """The body of a chat request, or of a completion request for a prompt string."""
    return {
        "model": model,
        **({"prompt": messages} if isinstance(messages, str) else {"messages": messages}),
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        # not OpenAI's, but llama-server and Reame accept it: every request generates exactly
        # max_tokens tokens, so all targets do the same work
        "ignore_eos": True,
        # Reame's: the decode workloads compare plain decoding, the speculation workloads each
        # mode; llama-server ignores the field
        "speculation": speculation,
        # Reame's: these workloads time computing, and send the same request again; a server
        # that answers it from memory would time nothing (llama-server ignores the field)
        "answer_memory": False,
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

    async def stream(
        self, messages: Messages | str, max_tokens: int, speculation: str = "off"
    ) -> Timeline:
        body = chat_request_body(self.model, messages, max_tokens, speculation)
        return await self.stream_body(body, ChunkTally)

    async def stream_body(
        self, body: dict[str, Any], fold_for: Callable[[Timeline], Fold] = ChunkTally
    ) -> Any:
        """A request body sent as it is (a completion's when it has a `prompt`), streamed into
        `fold_for(timeline)`, the timeline started as the request goes; the fold's result."""
        path = "completions" if "prompt" in body else "chat/completions"
        url = f"{self.base}/v1/{path}"
        fold = fold_for(Timeline(time.perf_counter()))
        try:
            async with self._client.stream("POST", url, json=body) as response:
                await _check_status(response, f"{self.name}: POST {url}")
                return await fold_stream(response.aiter_text(), fold)
        except httpx.HTTPError as exc:
            raise BenchTargetError(f"{self.name}: POST {url}: {_describe(exc)}") from exc

    async def warm(self, messages: Messages) -> dict[str, Any] | None:
        """POST /v1/warm (Reame's): the messages computed, no answer; the server's body, None
        where the server has no such route (a 404)."""
        url = f"{self.base}/v1/warm"
        try:
            response = await self._client.post(url, json={"messages": messages})
            if response.status_code == 404:
                return None
            await _check_status(response, f"{self.name}: POST {url}")
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise BenchTargetError(f"{self.name}: POST {url}: {_describe(exc)}") from exc

    async def respond(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST /v1/responses (OpenAI's Responses API) with the model filled in: the server's
        body, None where the server answers it 4xx (it does not serve what was asked)."""
        return await self.post("/v1/responses", {"model": self.model, **body})

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The server's JSON answer to `body`, None where it answers 4xx."""
        url = f"{self.base}{path}"
        try:
            response = await self._client.post(url, json=body)
            if 400 <= response.status_code < 500:
                return None
            await _check_status(response, f"{self.name}: POST {url}")
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise BenchTargetError(f"{self.name}: POST {url}: {_describe(exc)}") from exc

    async def aclose(self) -> None:
        await self._client.aclose()


def _describe(exc: BaseException) -> str:
    # some httpx errors (timeouts) have an empty message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class InProcessTarget:
    """Reame's engine in this process, through the same Service the HTTP layer uses."""

    def __init__(self, runtime: Runtime, name: str = IN_PROCESS, owns_runtime: bool = False):
        self._runtime = runtime
        self._owns_runtime = owns_runtime
        self.name = name
        tuned = runtime.tuned
        self.detail = (
            f"Reame's engine in this process ({runtime.model.name}, {tuned.threads} threads, "
            f"parallel {tuned.parallel}, context {tuned.context_length})"
        )

    async def stream(
        self, messages: Messages | str, max_tokens: int, speculation: str = "off"
    ) -> Timeline:
        from reame.service import Job  # NOTE: an HTTP-only bench never loads llama.cpp

        service = self._runtime.service
        # the clock starts before templating and tokenizing: a server does both inside its
        # time to first token too
        timeline = Timeline(time.perf_counter())
        params = service.sampling(
            temperature=0.0, max_tokens=max_tokens, ignore_eos=True, speculation=speculation
        )
        if isinstance(messages, str):
            job = Job(service.text_prompt(messages), params)
        else:
            prompt = service.chat.prompt(messages)
            # as the HTTP layer does: the message ends are where the prefix cache snapshots
            job = Job(prompt, params, marks=service.chat.marks(messages, prompt))
        timeline.num_prompt_tokens = len(job.prompt)
        async for event in service.astream_job(job):
            now = time.perf_counter()
            if isinstance(event, TokenEvent):
                timeline.text += event.text
                if event.text and not timeline.first:
                    timeline.first = now
                if timeline.first:
                    timeline.token_times.append(now)
            elif isinstance(event, FinishEvent):
                if event.reason == "error":
                    raise BenchTargetError(f"{self.name}: {event.error}")
                timeline.finished = now
                timeline.first = timeline.first or now
                timeline.num_tokens = event.num_completion_tokens
                timeline.num_cached_tokens = event.num_cached_tokens
                timeline.text += event.text
        return timeline

    def replace_runtime(self, runtime: Runtime) -> None:
        """A restart: the old runtime is closed (its snapshots written), the new one serves."""
        self._runtime.close()
        self._runtime, self._owns_runtime = runtime, True

    async def aclose(self) -> None:
        """Closes the runtime only if it is this target's own."""
        if self._owns_runtime:
            self._runtime.close()
