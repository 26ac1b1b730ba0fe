"""From what a user asks (messages or a prompt, sampling options) to engine requests and back.

Streams are offered both as a plain iterator (CLI, bench) and as an async iterator (HTTP): the
engine calls each request's sink on its own thread, and the sink hands events across.
"""

from __future__ import annotations

import asyncio
import queue
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any
from uuid import uuid4

import structlog
from pydantic import ValidationError

from reame import metrics
from reame.cache.prefix_reuse import PrefixReuse, SessionKey
from reame.chat_prompt import ChatPrompts
from reame.engine.engine import Engine
from reame.engine.request import Event, FinishEvent, GenerationRequest, ThoughtSpec
from reame.errors import InvalidRequestError
from reame.grammar.matcher import Grammar, Grammars, GrammarSpec
from reame.llama.model import Model
from reame.loop_inbox import ChoiceEvent, LoopInbox
from reame.sampling import SamplingParams

log = structlog.get_logger("reame.service")


@dataclass(slots=True, frozen=True)
class Job:
    """One engine request of a call (a call with n choices has n jobs)."""

    prompt: list[int]
    params: SamplingParams
    session: SessionKey | None = None  # its state goes on from, and is kept for, this session
    marks: tuple[int, ...] = ()  # prompt lengths at message ends: where snapshots pay most
    scope: str = ""  # whose prefixes it reuses and adds to (GenerationRequest.scope)
    owner: str = ""  # whose share of the engine it runs in (GenerationRequest.owner)
    grammar: Grammar | None = None  # what its output must match
    # what follows its answer in the next turn's prompt (GenerationRequest.warm_ahead)
    warm_ahead: tuple[int, ...] = ()
    thought: ThoughtSpec | None = None  # its answer may think first
    # prompt lengths every request of this conversation cuts its chunks at, cold or warm: where
    # an answer starts, so the history computed ahead from there is computed as cold (history_ahead)
    cuts: tuple[int, ...] = ()


def build_sampling(defaults: Mapping[str, Any], **options: Any) -> SamplingParams:
    """Request options over configured defaults; a bad value is an InvalidRequestError."""
    values = {**defaults, **{k: v for k, v in options.items() if v is not None}}
    try:
        return SamplingParams(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = str(err["loc"][0]) if err["loc"] else None
        raise InvalidRequestError(f"{param}: {err['msg']}", param=param) from exc


class Service:
    def __init__(
        self,
        model: Model,
        engine: Engine,
        defaults: Mapping[str, Any],
        reuse: PrefixReuse,
        stream_interval: float = 0.0,
        grammars: Grammars | None = None,
        warm_ahead: bool = True,
        template_source: str | None = None,
    ) -> None:
        """`template_source`: the chat template in force (a user's file), else the GGUF's."""
        self.model, self.engine, self.reuse = model, engine, reuse
        self.cache = reuse.cache  # None: the prefix cache is off
        min_tokens = self.cache.config.min_tokens if self.cache is not None else None
        self.chat = ChatPrompts(
            model, template_source or model.chat_template, min_tokens, warm_ahead
        )
        self.sessions = reuse.sessions
        self.grammars = grammars
        self._stream_interval = stream_interval
        self._defaults = dict(defaults)
        self._inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopInbox] = (
            weakref.WeakKeyDictionary()
        )

    def sampling(self, **options: Any) -> SamplingParams:
        return build_sampling(self._defaults, **options)

    def grammar(self, spec: GrammarSpec, kind: str | None = None) -> Grammar:
        """The compiled grammar of a request (kept by its text), counted by `kind` (the spec's
        own by default); InvalidRequestError if it does not compile. Off the event loop."""
        if self.grammars is None:
            raise InvalidRequestError("this server runs without constrained decoding")
        grammar = self.grammars.compile(spec)
        metrics.GRAMMAR_REQUESTS.labels(kind or spec.kind).inc()
        return grammar

    def request(self, job: Job, take_snapshots: bool = True) -> GenerationRequest:
        """The engine request of a job, with what it reuses and keeps (PrefixReuse.plan). May
        read the disk: call it off the event loop."""
        reuse = self.reuse.plan(
            job.prompt, job.scope, job.session, job.marks, take_snapshots, job.cuts
        )
        warm = job.warm_ahead if reuse.keep_state else ()
        return GenerationRequest(
            job.prompt,
            job.params,
            stored=reuse.stored,
            keep_state=reuse.keep_state,
            keep_state_min_new=reuse.keep_state_min_new,
            snapshot_at=reuse.snapshot_at,
            cut_at=reuse.cut_at,
            cold_cuts=reuse.cold_cuts,
            scope=job.scope,
            owner=job.owner,
            grammar=job.grammar,
            warm_ahead=warm,
            session=job.session.name if job.session else "",
            thought=job.thought,
        )

    def finished(self, event: FinishEvent, job: Job | None = None) -> None:
        """Book what reuse saved (the final state comes back through PrefixReuse.keep)."""
        self.reuse.finished(event, job.session if job else None)

    def text_prompt(self, text: str) -> list[int]:
        return self.model.tokenize(text)

    def token_text(self, token: int) -> str:
        """A token's own text (a partial UTF-8 character shows as U+FFFD), for logprobs."""
        return self.model.piece(token).decode("utf-8", "replace")

    @property
    def failure(self) -> str | None:
        """Why nothing can be served (the engine thread died or is not running); None if it
        can."""
        if self.engine.failure is not None:
            return self.engine.failure
        return None if self.engine.is_alive else "the engine thread is not running"

    def on_failure(self, hook: Callable[[str], None]) -> None:
        """`hook(reason)` runs (on the engine thread) once nothing more can be served."""
        self.engine.on_death(hook)

    def stream(
        self, prompt: list[int], params: SamplingParams, grammar: Grammar | None = None
    ) -> Iterator[Event]:
        """Events of one request; closing the iterator early aborts the request."""
        return self.stream_job(Job(prompt, params, grammar=grammar))

    def stream_job(self, job: Job) -> Iterator[Event]:
        """Events of one job (its session and marks too), on this thread."""
        events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        request = self.request(job)
        self.engine.submit(request, events.put)
        is_done = False
        try:
            while not is_done:
                event = events.get()
                if isinstance(event, FinishEvent):
                    is_done = True
                    self.finished(event, job)
                yield event
        finally:
            if not is_done:
                self.engine.abort(request.request_id)

    async def astream_job(self, job: Job) -> AsyncIterator[Event]:
        """Like `stream`, for an asyncio loop: the loop never blocks on the engine."""
        async for batch in self.astream_many([job]):
            for choice in batch:
                yield choice.event

    async def astream_many(
        self,
        jobs: Sequence[Job],
        shared_prompt: bool = False,
        requests: list[GenerationRequest] | None = None,
    ) -> AsyncIterator[list[ChoiceEvent]]:
        """Events of several requests in the order the engine emitted them, a batch for each
        hand-over (one write to a client, however many tokens); leaving early (a client gone)
        aborts the ones still running. `shared_prompt`: the jobs have one prompt, computed once
        for all of them (the engine's group). The first batch is empty: it says every job was
        accepted (a refusal raises before it), so a caller can answer before any token.
        `requests`: the jobs' engine requests, made already off the loop (prepare)."""
        loop = asyncio.get_running_loop()
        inbox = self._inboxes.get(loop)
        if inbox is None:
            inbox = self._inboxes[loop] = LoopInbox(loop, self._stream_interval)
            self.engine.add_wake_hook(inbox.wake)
        events: asyncio.Queue[ChoiceEvent] = asyncio.Queue()
        running: dict[int, GenerationRequest] = {}
        held: set[int] = set()  # whose reader fell behind: they compute nothing meanwhile

        def backlog(index: int) -> None:
            if index not in held and index in running:
                held.add(index)
                self.engine.hold(running[index].request_id, True)

        if requests is None:  # NOTE: a cache lookup may read the disk: off the loop
            work = partial(self.prepare, jobs, shared_prompt)
            requests = await asyncio.to_thread(work) if self.cache else work()
        try:
            sinks = [
                inbox.sink(
                    events,
                    index,
                    partial(self.engine.abort, request.request_id),
                    partial(backlog, index),
                )
                for index, request in enumerate(requests)
            ]
            if shared_prompt:
                self.engine.submit_group(requests, sinks)
            else:
                self.engine.submit_all(requests, sinks)
            running.update(enumerate(requests))
            yield []
            while running:
                batch = [await events.get()]
                while not events.empty():
                    batch.append(events.get_nowait())
                for index in held & running.keys():  # NOTE: it reads again: go on
                    self.engine.hold(running[index].request_id, False)
                held.clear()
                for choice in batch:
                    if isinstance(choice.event, FinishEvent):
                        running.pop(choice.index)
                        self.finished(choice.event, jobs[choice.index])
                yield batch
        finally:
            for request in running.values():
                self.engine.abort(request.request_id)

    def prepare(self, jobs: Sequence[Job], shared_prompt: bool = False) -> list[GenerationRequest]:
        """The engine requests of `jobs`, with the stored states each may go on from read into
        memory (`shared_prompt`: a group's, one lookup for all). May read the disk: call it
        off the event loop."""
        return self._group_requests(jobs) if shared_prompt else self._requests(jobs)

    def _group_requests(self, jobs: Sequence[Job]) -> list[GenerationRequest]:
        """One lookup for a group: only its first request computes (and snapshots) the prompt."""
        first = self.request(jobs[0])
        return [first] + [
            replace(first, params=job.params, request_id=uuid4().hex, keep_state=False)
            for job in jobs[1:]
        ]

    def _requests(self, jobs: Sequence[Job]) -> list[GenerationRequest]:
        """Only the first job of a prompt snapshots it: its copies (n > 1) would store the same
        states again."""
        seen: set[int] = set()
        out = []
        for job in jobs:
            out.append(self.request(job, take_snapshots=id(job.prompt) not in seen))
            seen.add(id(job.prompt))
        return out

    def generate(
        self, prompt: list[int], params: SamplingParams, grammar: Grammar | None = None
    ) -> tuple[list[int], str, FinishEvent]:
        """Run to the end: token ids, text, and the finish event."""
        tokens: list[int] = []
        parts: list[str] = []
        for event in self.stream(prompt, params, grammar):
            if isinstance(event, FinishEvent):
                parts.append(event.text)
                return tokens, "".join(parts), event
            tokens.append(event.token)
            parts.append(event.text)
        raise RuntimeError("the engine ended a stream without a finish event")
