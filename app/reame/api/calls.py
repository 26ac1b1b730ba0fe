"""One OpenAI call (chat or completion, streamed or not) from a validated body to its response.

No HTTP here: the server hands in a body and writes out what comes back. The response and the
SSE frames are two readings of the same choices, kept beside each other; the chunks of each
hand-over of a stream are written in call_frames.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from uuid import uuid4

from reame import metrics
from reame.api import openai_format as fmt
from reame.api.call_frames import batch_chunks
from reame.api.chat_turn import ChatTurn, chat_turn, template_messages
from reame.api.errors import ApiError
from reame.api.remembered import MEMORY_HEADER
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.api.served import Served, num_prompts
from reame.api.sse import DONE, frame
from reame.api.structured import is_json, requested_grammar
from reame.api.tool_use import ToolUse
from reame.cache.prefix_reuse import SessionKey
from reame.conclave.convene import Verdict, candidate_jobs, convene, open_conclave
from reame.engine.request import FinishEvent, GenerationRequest, ThoughtSpec, TokenEvent
from reame.errors import InvalidRequestError
from reame.history_ahead import history_ahead
from reame.loop_inbox import ChoiceEvent
from reame.service import Job
from reame.tool_calls.stream import ToolStream

_BACKGROUND: set[asyncio.Task] = set()  # NOTE: the loop holds tasks weakly


class Call:
    """A call in three steps: the constructor makes the cheap checks (on the event loop),
    `start()` renders, tokenizes and submits off the loop (every refusal is raised there, before
    a byte is sent), then `response()` or `frames()` reads the answer."""

    def __init__(
        self,
        served: Served,
        body: ChatRequest | CompletionRequest,
        session_id: str | None,
        owner: str = "",
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
        self.grammar_spec = requested_grammar(body)
        self.best_of = served.candidates(body, session_id)
        served.check_room(body, self.best_of)
        if self.best_of > 1:
            vote_on = body.vote_on or ("json" if is_json(self.grammar_spec) else None)
            self.vote_rule = served.vote_rule(vote_on)
        self.is_chat = isinstance(body, ChatRequest)
        self.rid = ("chatcmpl-" if self.is_chat else "cmpl-") + uuid4().hex[:24]
        self.created = int(time.time())
        self.started = time.perf_counter()
        self.session_id, self.owner = session_id, owner
        self.params = served.service.sampling(**body.sampling_options())
        self.with_logprobs = self.params.logprobs
        self.jobs: list[Job] = []
        self.places = 0  # request places counted against the key, from start() to close()
        self.choices: list[fmt.Choice] = []
        self.is_first_token_seen = False
        self.verdict: Verdict | None = None
        self._stream: AsyncGenerator[list[ChoiceEvent]] | None = None
        self.tool_use: ToolUse | None = None  # set by start() for a chat with tools
        self.tool_streams: dict[int, ToolStream] = {}  # a streamed choice's reader of calls
        self.thought: ThoughtSpec | None = None  # set by start() for a chat that may think
        # the turn, its messages and tools, where its history is computed ahead once answered
        self._history: tuple[ChatTurn, list[dict], list[dict] | None] | None = None
        self.memory = served.call_memory(body, session_id, owner)  # None: the memory is off

    async def start(self) -> None:
        """Build the jobs off the loop (a template rendered over a large body, its tokens, the
        prefix lookup) and submit them; the engine's checks and its room refuse them there."""
        places = num_prompts(self.body) * self.body.n * self.best_of
        self.served.take_places(self.owner, places)
        self.places = places
        service = self.served.service
        with service.engine.idle.arriving():  # NOTE: no idle-time step starts meanwhile
            # NOTE: one trip off the loop renders, tokenizes and reads the stored states, and
            # one back; the loop then submits
            self.jobs, prepared = await asyncio.to_thread(self._prepare)
            thinks = self.thought is not None
            self.choices = [
                fmt.Choice(i, thought=[] if thinks else None) for i in range(len(self.jobs))
            ]
            if self.memory is not None and self.memory.is_hit:
                self._stream = self.memory.stream()
            elif self.best_of > 1:
                self._stream = open_conclave(service, self.jobs[0], self.best_of, prepared)
            else:
                self._stream = service.astream_many(self.jobs, requests=prepared[1])
            try:
                await anext(self._stream)  # NOTE: the empty batch: every job was accepted
            except InvalidRequestError as exc:
                raise ApiError(400, str(exc), exc.param, exc.code) from exc

    async def close(self) -> None:
        """Stop whatever still runs (a client gone before the end); give the key's places back."""
        places, self.places = self.places, 0
        self.served.give_back_places(self.owner, places)
        if self._stream is not None:
            await self._stream.aclose()

    def _prepare(self) -> tuple[list[Job], tuple[list[Job], list[GenerationRequest]]]:
        """The call's jobs, and the jobs the engine runs (a Conclave's candidates, else the
        same) with their engine requests (Service.prepare); none if the answer is in memory."""
        jobs = self._make_jobs()
        service, explore = self.served.service, self.served.explore
        runs = candidate_jobs(jobs[0], self.best_of, explore) if self.best_of > 1 else jobs
        if self.memory is not None:
            rule = self.vote_rule if self.best_of > 1 else None
            extra = (self.best_of, explore, str(rule), self.served.thinking)
            if self.memory.look_up(jobs, runs, extra):
                return jobs, ([], [])
        if self.best_of > 1:
            return jobs, (runs, service.prepare(runs, shared_prompt=True))
        return jobs, (jobs, service.prepare(jobs))

    def first_prompt(self) -> tuple[list[int], tuple[int, ...]]:
        """The first prompt as the model takes it, and where its messages end; nothing
        submitted (a Messages call's count_tokens, or its max_tokens 0). Off the event loop."""
        job = self._make_jobs()[0]
        return job.prompt, job.marks

    def _make_jobs(self) -> list[Job]:
        body, params = self.body, self.params
        service = self.served.service
        marks: tuple[int, ...] = ()
        closing: tuple[int, ...] = ()
        grammar = None
        try:
            if self.grammar_spec is not None:
                grammar = service.grammar(self.grammar_spec)
            if isinstance(body, ChatRequest):
                messages = template_messages(body, service)
                tools = None
                self.tool_use = ToolUse.of(
                    body, messages, service.model, service.chat.template_source
                )
                if self.tool_use is not None:
                    messages, tools = self.tool_use.prompt(messages)
                    grammar = self.tool_use.compiled(grammar, service.grammar)
                turn = chat_turn(
                    service,
                    body,
                    messages,
                    tools,
                    params.max_tokens,
                    grammar is not None,
                    self.served.thinking,
                    warms_ahead=self.tool_use is None,
                )
                prompts, marks, closing = [turn.prompt], turn.marks, turn.closing
                self.thought = turn.thought
                if turn.computes_history_ahead:
                    self._history = (turn, messages, tools)
            else:
                prompts = [
                    p if isinstance(p, list) else service.text_prompt(p) for p in body.prompts()
                ]
        except InvalidRequestError as exc:
            raise ApiError(400, str(exc), exc.param, exc.code) from exc
        jobs = []
        session = SessionKey(self.owner, self.session_id) if self.session_id is not None else None
        for prompt in prompts:
            for k in range(body.n):
                seed = params.seed + k if params.seed is not None else None
                first = k == 0 and prompt is prompts[0]
                jobs.append(
                    Job(
                        prompt,
                        params.model_copy(update={"seed": seed}),
                        session=session if first else None,
                        marks=marks,
                        scope=self.owner if self.served.is_scoped_per_key else "",
                        owner=self.owner,
                        grammar=grammar,
                        warm_ahead=closing if first else (),
                        thought=self.thought,
                        cuts=self._history[0].cuts if first and self._history else (),
                    )
                )
        return jobs

    def piece(self, token: int) -> str:
        return self.served.service.token_text(token)

    def _totals(self) -> dict[str, object]:
        """Each prompt counts once, however many choices it has (as OpenAI counts it); a
        Conclave's completion tokens are all its candidates' (all were computed), and so are
        its drafts (of the candidates that finished)."""
        if (v := self.verdict) is not None:
            finishes = [c.finish for c in v.candidates if c.finish]
            prompt = len(self.jobs[0].prompt)
            return fmt.usage(prompt, v.num_completion_tokens, v.num_cached_tokens, finishes)
        return fmt.choices_usage([len(j.prompt) for j in self.jobs], self.choices, self.body.n)

    async def _events(self) -> AsyncIterator[list[tuple[fmt.Choice, TokenEvent | FinishEvent]]]:
        """The engine's events, a batch for each hand-over, booked on their choices."""
        assert self._stream is not None, "start() first"
        try:
            async for batch in self._stream:
                if not self.is_first_token_seen and any(
                    isinstance(item.event, TokenEvent) for item in batch
                ):
                    self.is_first_token_seen = True
                    metrics.TIME_TO_FIRST_TOKEN.observe(time.perf_counter() - self.started)
                booked = []
                for item in batch:
                    choice, event = self.choices[item.index], item.event
                    if self.memory is not None:
                        self.memory.saw(item.index, event)
                    if self.tool_use is not None and isinstance(event, TokenEvent):
                        choice.parts.append(self.answer_text(event))
                    else:
                        choice.parts.append(event.text)
                    if choice.thought is not None:
                        choice.thought.append(event.reasoning)
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
        if not event.reason.is_whole or self.is_recalled:
            return
        metrics.GENERATED_TOKENS.inc(event.num_completion_tokens)
        if index % self.body.n == 0:
            metrics.PROMPT_TOKENS.inc(event.num_prompt_tokens)
            metrics.CACHED_PROMPT_TOKENS.inc(event.num_cached_tokens)

    async def _convene(self) -> None:
        """Run the Conclave (or take the one remembered) and make its winner choice 0."""
        recalled = self.memory.verdict if self.memory is not None else None
        try:
            verdict = recalled or await convene(
                self.served.service,
                self.jobs[0],
                self.best_of,
                self.vote_rule,
                self.body.vote_early_stop,
                self._stream,
            )
        except InvalidRequestError as exc:
            raise ApiError(400, str(exc), exc.param, exc.code) from exc
        self.verdict = verdict
        winner = verdict.winner
        choice = self.choices[0]
        choice.parts = winner.parts
        choice.logprobs = winner.tokens if self.with_logprobs else []
        choice.finish = verdict.failed or winner.finish
        if choice.thought is not None:
            choice.thought = [t.reasoning for t in winner.tokens]
            choice.thought.append(winner.finish.reasoning if winner.finish else "")
        if winner.finish is not None and verdict.failed is None and recalled is None:
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
        failed = [c.finish for c in self.choices if c.finish and not c.finish.reason.is_whole]
        if failed:
            raise self.served.failure(failed[0])
        body = fmt.response(
            self.rid,
            self.created,
            self.served.model_id,
            self.choices,
            self.piece,
            self.with_logprobs,
            self._totals(),
            self.is_chat,
            self.inline_thought,
        )
        if self.verdict is not None:
            body["conclave"] = self.verdict.summary()
        self._remember()
        self._compute_history_ahead()
        if self.tool_use is not None:
            for entry, choice in zip(body["choices"], self.choices, strict=True):  # type: ignore[arg-type]
                entry["message"], called = self.tool_use.message(choice.text)
                if choice.reasoning is not None:
                    entry["message"]["reasoning_content"] = choice.reasoning
                if called and entry["finish_reason"] != "length":
                    entry["finish_reason"] = "tool_calls"
        return body

    async def frames(self) -> AsyncIterator[str]:
        """SSE frames as OpenAI frames them: the chunks, each one hand-over's in one write,
        then DONE."""
        async for batch in self.chunks():
            yield "".join(frame(c) for c in batch)
        yield DONE

    async def chunks(self) -> AsyncIterator[list[dict]]:
        """The stream's chunks, those of one hand-over together: a role chunk per choice first
        (chat), deltas, finish chunks (or the error that ended a choice), usage if asked."""
        model = self.served.model_id
        if self.is_chat:
            yield [
                fmt.chat_chunk(
                    self.rid, self.created, model, c.index, {"role": "assistant", "content": ""}
                )
                for c in self.choices
            ]
        if self.best_of > 1:  # NOTE: the answer is known only after the vote: one delta
            await self._convene()
            choice, verdict = self.choices[0], self.verdict
            assert verdict is not None and choice.finish is not None
            events: list[TokenEvent | FinishEvent] = [*verdict.winner.tokens, choice.finish]
            yield list(batch_chunks(self, [(choice, e) for e in events]))
        else:
            async for batch in self._events():
                if chunks := list(batch_chunks(self, batch)):
                    yield chunks
        self._remember()
        self._compute_history_ahead()
        if self.body.include_usage:
            obj = "chat.completion.chunk" if self.is_chat else "text_completion"
            yield [fmt.usage_chunk(self.rid, self.created, model, obj, self._totals())]

    def headers(self) -> dict[str, str]:
        """What the response's headers say of the call once it started: answered from memory."""
        return {MEMORY_HEADER: "hit"} if self.is_recalled else {}

    @property
    def is_recalled(self) -> bool:
        """The answer came from the answer memory: nothing was computed."""
        return self.memory is not None and self.memory.is_hit

    def _remember(self) -> None:
        """A whole answer of a determined call, computed as a lone request: kept."""
        if self.memory is not None:
            self.memory.keep(len(self.choices), self.verdict)

    def _compute_history_ahead(self) -> None:
        """A whole answer of one choice, whose template drops its thought from the history:
        that history is computed in idle time (Service.history_ahead), off the event loop."""
        if self._history is None or self.best_of > 1 or len(self.choices) != 1:
            return
        choice = self.choices[0]
        if self.tool_use is not None or choice.finish is None or not choice.finish.reason.is_whole:
            return
        turn, messages, tools = self._history
        service = self.served.service
        work = asyncio.to_thread(
            history_ahead, service, self.jobs[0], messages, choice.text, tools, turn.kwargs
        )
        task = asyncio.get_running_loop().create_task(work)
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    def answer_text(self, event: TokenEvent) -> str:
        """A token's answer text as the tool reader needs it (a marker that is a control token
        written out); nothing of a thought."""
        assert self.tool_use is not None
        return event.text if event.in_thought else self.tool_use.text_of(event.token, event.text)

    @property
    def inline_thought(self) -> tuple[str, str] | None:
        """The thought's markers where it stays in content: reasoning_format "inline", and no
        schema, grammar or tools (their answers are read apart from the thought)."""
        thought = self.thought
        if thought is None or not self.served.reasoning_inline:
            return None
        if self.grammar_spec is not None or self.tool_use is not None:
            return None
        return thought.open, thought.close
