"""One OpenAI call (chat or completion, streamed or not) from a validated body to its response.

No HTTP here: the server hands in a body and writes out what comes back.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from uuid import uuid4

from reame import metrics
from reame.api import openai_format as fmt
from reame.api.errors import ApiError
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.api.sse import DONE, frame
from reame.conclave.answers import compile_rule
from reame.conclave.convene import Verdict, convene
from reame.engine.request import FinishEvent, TokenEvent
from reame.errors import EngineBusyError, InvalidRequestError
from reame.runtime import Runtime
from reame.service import Job
from reame.sessions import SessionStore


@dataclass(slots=True)
class Served:
    """What a call needs of the server: the runtime, the sessions, the model's names."""

    runtime: Runtime
    sessions: SessionStore
    model_id: str
    model_names: frozenset[str]
    max_n: int
    best_of: int = 1  # when a request does not say
    max_best_of: int = 8
    vote_on: str = "auto"


class Call:
    def __init__(
        self, served: Served, body: ChatRequest | CompletionRequest, session_id: str | None
    ) -> None:
        if body.model not in served.model_names:
            raise ApiError(
                404,
                f"The model '{body.model}' does not exist; this server serves '{served.model_id}'",
                "model",
                "model_not_found",
            )
        if body.n > served.max_n:
            raise ApiError(
                400,
                f"n is {body.n}, above this server's limit of {served.max_n}",
                "n",
                "invalid_value",
            )
        self.served, self.body = served, body
        self.best_of = self._best_of(body, session_id)
        self.is_chat = isinstance(body, ChatRequest)
        self.rid = ("chatcmpl-" if self.is_chat else "cmpl-") + uuid4().hex[:24]
        self.created = int(time.time())
        self.started = time.perf_counter()
        self.session_id = session_id
        service = served.runtime.service
        params = service.sampling(**body.sampling_options())
        self.with_logprobs = params.logprobs
        marks: tuple[int, ...] = ()
        if self.is_chat:
            messages = [m.as_template_input() for m in body.messages]
            prompts = [service.chat_prompt(messages)]
            marks = service.chat_marks(messages, prompts[0])
        else:
            prompts = [p if isinstance(p, list) else service.text_prompt(p) for p in body.prompts()]
        prefix = None
        if session_id is not None:
            session = served.sessions.get(session_id)
            prefix = session.state if session else None
        self.jobs: list[Job] = []
        for prompt in prompts:
            for k in range(body.n):
                seed = params.seed + k if params.seed is not None else None
                first = k == 0 and prompt is prompts[0] and session_id is not None
                self.jobs.append(
                    Job(
                        prompt,
                        params.model_copy(update={"seed": seed}),
                        prefix if first else None,
                        keep_state=first,
                        marks=marks,
                    )
                )
        # NOTE: checked here, before any byte is sent: once a stream has begun, an error can no
        # longer be an HTTP status
        engine = served.runtime.engine
        for job in self.jobs:
            engine.check(job.prompt, job.params)
        if self.best_of > 1:
            self.vote_rule = self._vote_rule(body.vote_on or served.vote_on)
        if not engine.has_room(self.best_of if self.best_of > 1 else len(self.jobs)):
            raise EngineBusyError("every sequence and waiting place is taken; retry shortly")
        self.choices = [fmt.Choice(i) for i in range(len(self.jobs))]
        self.is_first_token_seen = False
        self.verdict: Verdict | None = None

    def _best_of(self, body: ChatRequest | CompletionRequest, session_id: str | None) -> int:
        """How many candidates vote (1: no Conclave); a 400 for what a Conclave cannot do."""
        served = self.served
        if body.best_of is None:  # NOTE: the configured default only where it can apply
            simple = body.n == 1 and session_id is None and self._num_prompts(body) == 1
            return served.best_of if simple else 1
        limit = min(served.max_best_of, served.runtime.engine.context.shape.num_sequences)
        if body.best_of > limit:
            which = (
                "max_best_of" if limit == served.max_best_of else "the sequences it runs: parallel"
            )
            raise ApiError(
                400,
                f"best_of is {body.best_of}, above this server's limit of {limit} ({which})",
                "best_of",
                "invalid_value",
            )
        if body.best_of > 1:
            for reason, ok in (
                ("n must be 1 with best_of", body.n == 1),
                ("best_of takes one prompt", self._num_prompts(body) == 1),
                ("best_of cannot be used with a session", session_id is None),
            ):
                if not ok:
                    raise ApiError(400, reason, "best_of", "invalid_value")
        return body.best_of

    @staticmethod
    def _num_prompts(body: ChatRequest | CompletionRequest) -> int:
        return 1 if isinstance(body, ChatRequest) else len(body.prompts())

    @staticmethod
    def _vote_rule(rule: str) -> str | re.Pattern[str]:
        try:
            return compile_rule(rule)
        except ValueError as exc:
            raise ApiError(400, f"vote_on: {exc}", "vote_on", "invalid_value") from None

    def _piece(self, token: int) -> str:
        return self.served.runtime.model.piece(token).decode("utf-8", "replace")

    def _totals(self) -> dict[str, object]:
        """Each prompt counts once, however many choices it has (as OpenAI counts it); a
        Conclave's completion tokens are all its candidates' (all were computed)."""
        if (v := self.verdict) is not None:
            return fmt.usage(len(self.jobs[0].prompt), v.num_completion_tokens, v.num_cached_tokens)
        firsts = range(0, len(self.jobs), self.body.n)
        prompt = sum(len(self.jobs[i].prompt) for i in firsts)
        cached = sum(f.num_cached_tokens for i in firsts if (f := self.choices[i].finish))
        completion = sum(c.finish.num_completion_tokens for c in self.choices if c.finish)
        return fmt.usage(prompt, completion, cached)

    async def _events(self) -> AsyncIterator[list[tuple[fmt.Choice, TokenEvent | FinishEvent]]]:
        """The engine's events, a batch for each hand-over, booked on their choices."""
        service = self.served.runtime.service
        try:
            async for batch in service.astream_many(self.jobs):
                if not self.is_first_token_seen and any(
                    isinstance(item.event, TokenEvent) for item in batch
                ):
                    self.is_first_token_seen = True
                    metrics.TIME_TO_FIRST_TOKEN.observe(time.perf_counter() - self.started)
                booked = []
                for item in batch:
                    choice, event = self.choices[item.index], item.event
                    choice.parts.append(event.text)
                    if isinstance(event, TokenEvent):
                        if self.with_logprobs:
                            choice.logprobs.append(event)
                    else:
                        choice.finish = event
                        self._account(item.index, event)
                    booked.append((choice, event))
                yield booked
        except InvalidRequestError as exc:
            raise ApiError(400, str(exc), exc.param, exc.code) from exc

    def _account(self, index: int, event: FinishEvent) -> None:
        if event.reason in ("error", "abort"):
            return
        metrics.GENERATED_TOKENS.inc(event.num_completion_tokens)
        if index % self.body.n == 0:
            metrics.PROMPT_TOKENS.inc(event.num_prompt_tokens)
            metrics.CACHED_PROMPT_TOKENS.inc(event.num_cached_tokens)
        if event.state is not None and self.session_id is not None:
            self.served.sessions.save(self.session_id, event.state)

    async def _convene(self) -> None:
        """Run the Conclave and make its winner choice 0."""
        try:
            verdict = await convene(
                self.served.runtime.service,
                self.jobs[0],
                self.best_of,
                self.vote_rule,
                self.body.vote_early_stop,
            )
        except InvalidRequestError as exc:
            raise ApiError(400, str(exc), exc.param, exc.code) from exc
        self.verdict = verdict
        winner = verdict.winner
        choice = self.choices[0]
        choice.parts = winner.parts
        choice.logprobs = winner.tokens if self.with_logprobs else []
        choice.finish = verdict.failed or winner.finish
        if winner.finish is not None and verdict.failed is None:
            metrics.TIME_TO_FIRST_TOKEN.observe(time.perf_counter() - self.started)
            metrics.GENERATED_TOKENS.inc(verdict.num_completion_tokens)
            metrics.PROMPT_TOKENS.inc(winner.finish.num_prompt_tokens)
            metrics.CACHED_PROMPT_TOKENS.inc(verdict.num_cached_tokens)

    async def response(self) -> dict[str, object]:
        if self.best_of > 1:
            await self._convene()
        else:
            async for _ in self._events():
                pass  # the choices book what they get
        failed = [
            c.finish for c in self.choices if c.finish and c.finish.reason in ("error", "abort")
        ]
        if failed:
            raise ApiError(
                503 if failed[0].reason == "abort" else 500,
                failed[0].error or "the server stopped before the answer was complete",
            )
        body = fmt.response(
            self.rid,
            self.created,
            self.served.model_id,
            self.choices,
            self._piece,
            self.with_logprobs,
            self._totals(),
            self.is_chat,
        )
        if self.verdict is not None:
            body["conclave"] = self.verdict.summary()
        return body

    async def frames(self) -> AsyncIterator[str]:
        """SSE frames: a role chunk per choice first (chat), deltas, finish chunks, usage, DONE."""
        model = self.served.model_id
        if self.is_chat:
            for c in self.choices:
                yield frame(
                    fmt.chat_chunk(
                        self.rid, self.created, model, c.index, {"role": "assistant", "content": ""}
                    )
                )
        if self.best_of > 1:  # NOTE: the answer is known only after the vote: one delta
            await self._convene()
            choice, verdict = self.choices[0], self.verdict
            assert verdict is not None and choice.finish is not None
            events: list[TokenEvent | FinishEvent] = [*verdict.winner.tokens, choice.finish]
            yield "".join(self._batch_frames([(choice, e) for e in events]))
        else:
            async for batch in self._events():
                if frames := "".join(self._batch_frames(batch)):
                    yield frames
        if self.body.include_usage:
            obj = "chat.completion.chunk" if self.is_chat else "text_completion"
            yield frame(fmt.usage_chunk(self.rid, self.created, model, obj, self._totals()))
        yield DONE

    def _batch_frames(
        self, batch: list[tuple[fmt.Choice, TokenEvent | FinishEvent]]
    ) -> Iterator[str]:
        """One delta a choice for the tokens of a hand-over (one write, however many tokens),
        then its finish."""
        tokens: dict[int, list[TokenEvent]] = {}
        for choice, event in batch:
            if isinstance(event, TokenEvent):
                tokens.setdefault(choice.index, []).append(event)
                continue
            yield from self._token_frames(choice.index, tokens.pop(choice.index, []))
            if event.reason in ("error", "abort"):
                error = event.error or "the server stopped before the end"
                yield frame(ApiError(500, error).body())
            else:
                yield frame(self._delta(choice.index, event.text, fmt.finish_reason(event), []))
        for index, events in tokens.items():
            yield from self._token_frames(index, events)

    def _token_frames(self, index: int, events: list[TokenEvent]) -> Iterator[str]:
        text = "".join(e.text for e in events)
        if text or (self.with_logprobs and events):
            yield frame(self._delta(index, text, None, events))

    def _delta(self, index: int, text: str, finish: str | None, events: list[TokenEvent]) -> dict:
        model = self.served.model_id
        if self.is_chat:
            lp = fmt.chat_logprobs(events, self._piece) if self.with_logprobs and events else None
            delta = {"content": text} if text or not finish else {}
            return fmt.chat_chunk(self.rid, self.created, model, index, delta, finish, lp)
        lp = fmt.completion_logprobs(events, self._piece) if self.with_logprobs and events else None
        return fmt.completion_chunk(self.rid, self.created, model, index, text, finish, lp)
