"""The engine thread: admit, schedule, one llama_decode for many sequences, sample, emit.

NOTE: the only thread that calls llama.cpp (the prefix cache's writer only writes files).
llama_decode releases the GIL, so the caller's event loop stays free while a step runs. Requests
come in through a thread-safe inbox; events go out through each request's sink, called on the
engine thread.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import structlog

from reame import metrics
from reame.detokenize import TextStream
from reame.engine.constrained import mask_at, take_forced
from reame.engine.drafting import add_drafts
from reame.engine.request import (
    Finish,
    FinishEvent,
    GenerationRequest,
    SavedState,
    Sink,
    TokenEvent,
)
from reame.engine.schedule import Work, plan_step
from reame.engine.sequence import Sequence
from reame.engine.slots import Slots
from reame.errors import EngineBusyError, EngineFailedError, InvalidRequestError
from reame.llama import Context, DecodeError, Model
from reame.sampling import Sampled, Sampler, SamplingParams
from reame.spec.speculation import Speculation

log = structlog.get_logger("reame.engine")

SWITCH_INTERVAL_SECONDS = 0.001


@dataclass(slots=True, frozen=True)
class _Abort:
    request_id: str


@dataclass(slots=True, frozen=True)
class _LateFork:
    """A group's follower that found no free sequence when its prompt was computed: it starts
    from the prompt's saved state and the logits after it once a sequence frees up."""

    seq: Sequence
    state: bytearray
    logits: np.ndarray
    num_computed: int
    chunk_ends: tuple[int, ...]


_STOP = object()


class Engine:
    """Continuous batching over one llama context: a request joins the running batch at the
    next step, a finished one leaves it, an aborted one frees its sequence at the next step."""

    def __init__(
        self,
        model: Model,
        context: Context,
        context_length: int,
        max_waiting: int = 64,
        on_snapshot: Callable[[SavedState, str], None] | None = None,
        speculation: Speculation | None = None,
        max_wait_seconds: float = 0.0,
        forced_runs: bool = True,
    ) -> None:
        """`max_wait_seconds`: a request still waiting for a sequence after this long is refused
        (finish reason "busy"), so no client hangs behind long answers; 0: it waits.
        `forced_runs`: the tokens a grammar forces go into one step together (else one a
        step, as a sampled token would)."""
        self.model, self.context = model, context
        self.context_length = context_length
        self._max_in_flight = context.shape.num_sequences + max_waiting
        self._num_in_flight = 0
        self._in_flight_lock = threading.Lock()
        self.max_sequences_in_step = 0  # read by tests and the bench; the rest is in metrics
        self._budget = context.shape.batch_size
        self._on_snapshot = on_snapshot
        self._spec = speculation
        self._inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._waiting: deque[Sequence] = deque()
        self._late: deque[_LateFork] = deque()  # followers waiting for a sequence, first first
        self._running: list[Sequence] = []
        self._slots = Slots(context, keeps_prompts=on_snapshot is not None)
        self._wake_hooks: tuple[weakref.WeakMethod[Callable[[], None]], ...] = ()
        self._wake_hooks_lock = threading.Lock()
        self._published = (-1, -1)  # running and waiting, as the gauges last showed them
        self._max_wait = max_wait_seconds
        self._forced_runs = forced_runs
        self.failure: str | None = None  # why the engine thread died; None while it serves
        self._death_hooks: list[Callable[[str], None]] = []
        self._thread = threading.Thread(target=self._run, name="reame-engine", daemon=True)

    # -- called from any thread -------------------------------------------------------------

    def start(self) -> None:
        # NOTE: after each llama_decode the engine thread needs the GIL back at once; with the
        # default 5 ms switch interval a busy event loop thread can hold it through a whole step
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
        self._thread.start()

    def check(self, prompt: list[int], params: SamplingParams) -> Sampler:
        """Raise InvalidRequestError if this can never be served; else its sampler. Callers that
        must answer before streaming starts check first; submit checks again."""
        num_prompt = len(prompt)
        if num_prompt == 0:
            raise InvalidRequestError("the prompt is empty", param="prompt")
        if num_prompt >= self.context_length:
            raise InvalidRequestError(
                f"the prompt is {num_prompt} tokens but a sequence's context holds "
                f"{self.context_length} tokens; shorten the prompt or raise context_length",
                param="prompt",
            )
        if any(not 0 <= t < self.model.vocab_size for t in prompt):
            raise InvalidRequestError("the prompt holds token ids outside the vocabulary", "prompt")
        try:
            return Sampler(params, self.model.vocab_size)
        except ValueError as exc:
            raise InvalidRequestError(str(exc), param="logit_bias") from exc

    def has_room(self, count: int) -> bool:
        """Whether `count` more requests would be accepted now (a hint: others may race)."""
        return self._num_in_flight + count <= self._max_in_flight

    def submit(self, request: GenerationRequest, sink: Sink) -> None:
        """Queue a request; raises InvalidRequestError at once if it can never be served, and
        EngineBusyError if every running and waiting place is taken."""
        self._enter(self._sequence(request, sink), 1)

    def _sequence(self, request: GenerationRequest, sink: Sink) -> Sequence:
        sampler = self.check(request.prompt, request.params)
        seq = Sequence(request, sink, sampler, TextStream(request.params.stop))
        seq.tokens.extend(request.prompt)
        if self._spec is not None and request.params.speculation != "off":
            seq.drafters = self._spec.drafters(seq.num_prompt, request.scope)
        if self._on_snapshot is not None:
            seq.snapshots_due = sorted({p for p in request.snapshot_at if 0 < p <= seq.num_prompt})
        if request.grammar is not None:
            seq.constraint = request.grammar.matcher()
        return seq

    def _enter(self, seq: Sequence, count: int) -> None:
        seq.queued_at = time.monotonic()
        with self._in_flight_lock:
            if self.failure is not None:
                raise EngineFailedError(self.failure)
            if self._num_in_flight + count > self._max_in_flight:
                raise EngineBusyError(
                    f"all {self._max_in_flight} request places are taken; retry shortly"
                )
            self._num_in_flight += count
        self._inbox.put(seq)

    def submit_group(self, requests: list[GenerationRequest], sinks: list[Sink]) -> None:
        """Queue requests with one prompt whose KV is computed once: the first computes it, the
        others then get a copy of its KV and sample their first token from its logits (each
        with its own sampler). Admitted together when that many sequences are free (or all of
        them, for a group larger than the context runs: the rest start from the prompt's saved
        state as sequences free up, still without computing it again)."""
        if any(r.prompt != requests[0].prompt for r in requests):
            raise ValueError("a group's requests share one prompt")
        seqs = [self._sequence(r, s) for r, s in zip(requests, sinks, strict=True)]
        leader, followers = seqs[0], seqs[1:]
        for seq in followers:
            seq.snapshots_due = []
        leader.forks = followers
        self._enter(leader, len(seqs))

    def add_wake_hook(self, hook: Callable[[], None]) -> None:
        """`hook` (a bound method, held weakly) runs on the engine thread whenever it is about
        to leave Python, into a llama_decode or a wait for work: the moment to wake a consumer
        of the events emitted so far. Woken earlier, the consumer would hold the GIL while the
        engine still needs it to start the next step; woken then, it runs beside the decode."""
        with self._wake_hooks_lock:
            alive = tuple(ref for ref in self._wake_hooks if ref() is not None)
            self._wake_hooks = (*alive, weakref.WeakMethod(hook))

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive() and self.failure is None

    def on_death(self, hook: Callable[[str], None]) -> None:
        """`hook(reason)` runs on the engine thread if it dies (after every request in it has
        been finished with an error); at once if it is dead already."""
        with self._in_flight_lock:
            self._death_hooks.append(hook)
            failure = self.failure
        if failure is not None:
            hook(failure)

    def abort(self, request_id: str) -> None:
        self._inbox.put(_Abort(request_id))

    def close(self, timeout: float = 30.0) -> bool:
        """Stop the engine thread (requests still in it end as aborted); False if it is still
        inside llama.cpp after `timeout`: then nothing it uses may be freed."""
        if self._thread.is_alive():
            self._inbox.put(_STOP)
            self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the engine thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # NOTE: anything that escapes the loop ends the engine
            self._die(f"the engine thread died: {type(exc).__name__}: {exc}")

    def _die(self, reason: str) -> None:
        """No request may hang on a dead engine: every one in it, or on its way in, ends with
        the reason; later submissions are refused; the hooks tell the server."""
        log.critical("engine thread died", reason=reason, exc_info=True)
        with self._in_flight_lock:
            self.failure = reason
            hooks = list(self._death_hooks)
        seqs = [*self._running, *self._waiting, *(late.seq for late in self._late)]
        while True:
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(msg, Sequence):
                seqs.append(msg)
        for seq in seqs:
            for fork in [seq, *seq.forks]:
                with contextlib.suppress(Exception):
                    fork.sink(FinishEvent(Finish.ERROR, "", fork.num_prompt, 0, error=reason))
        self._running.clear()
        self._waiting.clear()
        self._late.clear()
        self._wake_consumers()
        for hook in hooks:
            with contextlib.suppress(Exception):
                hook(reason)

    def _serve(self) -> None:
        while True:
            is_idle = not self._running and not self._waiting and not self._late
            if is_idle:
                self._wake_consumers()
            if not self._take_inbox(block=is_idle):
                break
            self._admit()
            if self._running:
                try:
                    self._step()
                except Exception as exc:  # never let one bad step kill the server
                    log.exception("engine step failed")
                    for seq in list(self._running):
                        self._finish(seq, Finish.ERROR, error=str(exc))
        for seq in [*self._running, *self._waiting, *(late.seq for late in self._late)]:
            self._finish(seq, Finish.ABORT)
        self._wake_consumers()

    def _wake_consumers(self) -> None:
        for ref in self._wake_hooks:
            hook = ref()
            if hook is not None:
                hook()

    def _take_inbox(self, block: bool) -> bool:
        """Move messages from the inbox into engine state; False once asked to stop."""
        msg = self._inbox.get() if block else None
        while True:
            if msg is _STOP:
                return False
            if isinstance(msg, Sequence):
                self._waiting.append(msg)
            elif isinstance(msg, _Abort):
                self._mark_aborted(msg.request_id)
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _mark_aborted(self, request_id: str) -> None:
        for seq in self._waiting:
            if seq.request.request_id == request_id:
                self._waiting.remove(seq)
                self._finish(seq, Finish.ABORT)
                return
        for late in self._late:
            if late.seq.request.request_id == request_id:
                self._late.remove(late)
                self._finish(late.seq, Finish.ABORT)
                return
        for seq in [*self._running, *self._waiting]:
            if seq.request.request_id == request_id:
                seq.is_aborted = True
            for fork in seq.forks:
                if fork.request.request_id == request_id:
                    fork.is_aborted = True

    def _admit(self) -> None:
        for seq in [s for s in self._running if s.is_aborted]:
            self._finish(seq, Finish.ABORT)
        if self._max_wait > 0:
            too_old = time.monotonic() - self._max_wait
            for seq in [s for s in self._waiting if s.queued_at < too_old]:
                self._waiting.remove(seq)
                waited = f"waited {self._max_wait:g} s for a free sequence; retry shortly"
                self._finish(seq, Finish.BUSY, error=waited)
        while self._late and self._slots.num_free > 0:
            self._start_late(self._late.popleft())
        # NOTE: every slot owns a full context of KV cells, so a free slot is all it takes (a
        # group takes one for each of its sequences at once, or every sequence if it is larger:
        # the rest start from its prompt's state later; the queue waits behind it)
        total = self.context.shape.num_sequences
        while self._waiting and self._slots.num_free >= min(1 + len(self._waiting[0].forks), total):
            seq = self._waiting.popleft()
            self._running.append(seq)
            self._slots.place(seq)
            for fork in seq.forks:
                if self._slots.num_free:
                    fork.slot = self._slots.take_empty()
            if seq.constraint is not None and not seq.forks and self._forced_runs:
                self._force_first(seq)
        self._publish_counts()

    def _force_first(self, seq: Sequence) -> None:
        """What the grammar forces before any choice is computed with the prompt."""
        seq.held = []
        try:
            reason = self._take_run(seq, take_forced(seq, whole_run=True))
        except Exception as exc:  # NOTE: what one request asked for fails that one alone
            self._fail_alone(seq, exc, "the grammar failed")
            return
        if reason is not None:
            self._finish(seq, reason)

    def _fail_alone(self, seq: Sequence, exc: Exception, why: str) -> None:
        """A failure of what one request asked for (its grammar, its sampling) ends that
        request alone."""
        log.exception(why, request_id=seq.request.request_id)
        if seq in self._running:
            error = f"{why} ({type(exc).__name__}); the server log has the details"
            self._finish(seq, Finish.ERROR, error=error)

    def _publish_counts(self) -> None:
        counts = (len(self._running), len(self._waiting))
        if counts != self._published:
            self._published = counts
            metrics.RUNNING.set(counts[0])
            metrics.WAITING.set(counts[1])

    def _step(self) -> None:
        running = self._running
        if self._spec is not None:
            add_drafts(self._spec, running, self.context_length)
        plan = plan_step(
            [Work(len(s.tokens), s.num_computed, s.next_snapshot, len(s.drafts)) for s in running],
            self._budget,
        )
        # NOTE: llama.cpp's per-sequence KV streams are much slower when a batch's sequence ids
        # are out of order (4 decode tokens: 19 ms in order, 30 ms reversed, measured here),
        # hence sorted batches and the lowest free slot first
        plan.sort(key=lambda part: running[part.index].slot)
        tokens: list[int] = []
        positions: list[int] = []
        seq_ids: list[int] = []
        wants_logits: list[bool] = []
        outputs: list[tuple[Sequence, int, int]] = []  # sequence, first output index, count
        num_prompt_computed = 0
        for part in plan:
            seq = running[part.index]
            end = part.start + part.count
            tokens.extend(seq.tokens[part.start : end])
            positions.extend(range(part.start, end))
            seq_ids.extend([seq.slot] * part.count)
            wants_logits.extend([part.is_verify] * part.count)
            if end <= seq.num_prompt:
                seq.chunk_ends.append(end)
            num_prompt_computed += max(0, min(end, seq.num_prompt) - part.start)
            if part.wants_logits:
                wants_logits[-1] = True
                count = part.count if part.is_verify else 1
                outputs.append((seq, len(tokens) - count, count))
            seq.num_computed = end
        self._wake_consumers()
        started = time.perf_counter()
        try:
            self.context.decode(tokens, positions, seq_ids, wants_logits)
        except DecodeError as exc:
            # NOTE: take the sequences first: _finish removes them from `running`
            for seq in [running[part.index] for part in plan]:
                self._finish(seq, Finish.ERROR, error=str(exc))
            return
        seconds = time.perf_counter() - started
        metrics.STEP_SECONDS.observe(seconds)
        metrics.STEP_SEQUENCES.observe(len(plan))
        if num_prompt_computed:
            metrics.PROMPT_TOKENS_COMPUTED.inc(num_prompt_computed)
        if self._spec is not None:
            self._spec.controller.record_step(len(tokens), seconds)
        self.max_sequences_in_step = max(self.max_sequences_in_step, len(plan))
        for part in plan:
            running[part.index].release_held()
            if running[part.index].snapshots_due:
                self._snapshot(running[part.index])
        for seq, first, count in outputs:
            try:
                if seq.drafts:
                    self._verify(seq, first, count)
                else:
                    if seq.forks:
                        self._fork(seq, first)
                    self._advance(seq, self.context.logits(first))
            except Exception as exc:
                self._fail_alone(seq, exc, "the next token could not be picked")

    def _verify(self, seq: Sequence, first: int, count: int) -> None:
        """Keep the drafts the model agrees with and its own next token; roll the rest back."""
        start = seq.num_computed - count  # where the decode token sits
        drafts = seq.drafts[: count - 1]  # the budget may have cut the run short
        parts = seq.draft_parts
        seq.drafts = []
        del seq.tokens[start + 1 :]
        allowed_at = mask_at(seq, drafts) if seq.constraint else None
        kept = seq.sampler.verify(
            drafts, lambda i: self.context.logits(first + i), seq.tokens, allowed_at
        )
        accepted = len(kept) - 1
        assert self._spec is not None  # only a sequence with drafters has drafts
        self._spec.booked(parts, len(drafts), accepted)
        seq.num_computed = start + 1 + accepted
        reason = None
        for sampled in kept:
            reason = self._take(seq, sampled)
            if reason is not None:
                break
        if reason is None and self._forced_runs:
            reason = self._take_run(seq, take_forced(seq, whole_run=True))
        # NOTE: the KV cache holds what was computed of the tokens kept, nothing after
        seq.num_computed = min(seq.num_computed, len(seq.tokens))
        if not self.context.remove(seq.slot, seq.num_computed):
            # NOTE: memory that cannot be cut back (recurrent layers) would keep the rejected
            # drafts: compute the sequence again from its first token rather than go on wrong
            self.context.clear(seq.slot)
            seq.num_computed, seq.chunk_ends = 0, []
        if reason is not None:
            self._finish(seq, reason)

    def _snapshot(self, seq: Sequence) -> None:
        """Hand the state over when the KV cache holds exactly the next snapshot point (before
        sampling: the cache then holds the prompt up to there and nothing else)."""
        due = seq.snapshots_due
        while due and due[0] < seq.num_computed:  # passed (plan_step stops at them): skip
            due.pop(0)
        if due and due[0] == seq.num_computed and self._on_snapshot is not None:
            due.pop(0)
            kept = tuple(seq.tokens[: seq.num_computed])
            state = SavedState(kept, self.context.save_state(seq.slot))
            self._on_snapshot(state, seq.request.scope)

    def _fork(self, leader: Sequence, batch_index: int) -> None:
        """The leader's prompt is in its KV: each follower gets a copy of it and samples its
        first token from the same logits, then runs on its own."""
        forks, leader.forks = leader.forks, []
        for seq in [s for s in forks if s.is_aborted]:
            if seq.slot >= 0:
                self._slots.release(seq, keep_prompt=False)
            self._finish(seq, Finish.ABORT)
        forks = [s for s in forks if not s.is_aborted]
        if late := [s for s in forks if s.slot < 0]:
            forks = [s for s in forks if s.slot >= 0]
            state = self.context.save_state(leader.slot)
            logits = self.context.logits(batch_index).copy()
            for seq in late:
                ends = tuple(leader.chunk_ends)
                self._late.append(_LateFork(seq, state, logits, leader.num_computed, ends))
        try:
            self.context.copy(leader.slot, [s.slot for s in forks])
        except RuntimeError as exc:
            for seq in forks:
                self._slots.release(seq, keep_prompt=False)
                self._finish(seq, Finish.ERROR, error=str(exc))
            return
        for seq in forks:
            seq.num_computed = leader.num_computed
            seq.num_cached = seq.num_prompt  # NOTE: none of it computed for this one
            seq.chunk_ends = list(leader.chunk_ends)
            self._running.append(seq)
            self._advance(seq, self.context.logits(batch_index))

    def _start_late(self, late: _LateFork) -> None:
        """A follower gets a free sequence, the prompt's state and its first token."""
        seq = late.seq
        seq.slot = self._slots.take_empty()
        self._running.append(seq)
        if not self.context.load_state(seq.slot, late.state):
            self._finish(seq, Finish.ERROR, error="the prompt's state could not be restored")
            return
        seq.num_computed, seq.num_cached = late.num_computed, seq.num_prompt
        seq.chunk_ends = list(late.chunk_ends)
        try:
            self._advance(seq, late.logits)
        except Exception as exc:
            self._fail_alone(seq, exc, "the first token could not be picked")

    def _advance(self, seq: Sequence, logits: np.ndarray) -> None:
        constraint = seq.constraint
        if constraint is None:
            reason = self._take(seq, seq.sampler.sample(logits, seq.tokens))
        elif forced := take_forced(seq, whole_run=self._forced_runs):
            reason = self._take_run(seq, forced)  # NOTE: known: these logits are not needed
        else:
            allowed = constraint.allowed()
            if not allowed.any():
                raise RuntimeError(f"the grammar allows no token here: {constraint.error}")
            reason = self._take(seq, seq.sampler.sample(logits, seq.tokens, allowed))
            if reason is None and self._forced_runs:
                reason = self._take_run(seq, take_forced(seq, whole_run=True))
        if reason is not None:
            self._finish(seq, reason)

    def _take_run(self, seq: Sequence, run: list[Sampled]) -> Finish | None:
        """Take tokens until one ends the sequence; the finish reason if one does."""
        for sampled in run:
            reason = self._take(seq, sampled)
            if reason is not None:
                return reason
        return None

    def _take(self, seq: Sequence, sampled: Sampled) -> Finish | None:
        """Append a token and emit it; the finish reason if the sequence ends with it."""
        token = sampled.token
        seq.tokens.append(token)
        params = seq.request.params
        if not params.ignore_eos and self.model.is_end_of_generation(token):
            return Finish.STOP
        constraint = seq.constraint
        if constraint is not None and not constraint.consume([token]):
            raise RuntimeError(f"the grammar refused a token: {constraint.error}")
        delta = seq.text.push(self.model.piece(token))
        seq.emit(TokenEvent(token, delta.text, sampled.logprob, sampled.top_logprobs))
        if delta.is_stopped or (constraint is not None and constraint.is_finished):
            return Finish.STOP
        if seq.num_generated >= params.max_tokens or len(seq.tokens) >= self.context_length:
            return Finish.LENGTH
        return None

    def _finish(self, seq: Sequence, reason: Finish, error: str | None = None) -> None:
        for fork in seq.forks:  # the leader ends before its prompt did: so do its followers
            if fork.slot >= 0:
                self._slots.release(fork, keep_prompt=False)
            self._finish(fork, reason, error)
        seq.forks = []
        state = None
        request = seq.request
        if (
            seq.slot >= 0
            and request.keep_state
            and seq.num_computed - seq.num_cached >= request.keep_state_min_new
            and reason.is_whole
        ):
            kept = tuple(seq.tokens[: seq.num_computed])
            state = SavedState(kept, self.context.save_state(seq.slot))
        if seq.slot >= 0:
            self._slots.release(seq, keep_prompt=reason.is_whole)
            self._running.remove(seq)
        if self._spec is not None and reason.is_whole:
            self._spec.learn(seq.tokens, seq.num_prompt, request.scope)
        with self._in_flight_lock:
            self._num_in_flight -= 1
        self._publish_counts()  # NOTE: before the event, so a caller that saw it sees the count
        tail = seq.text.finish() if reason.is_whole else ""
        seq.release_held()
        seq.sink(
            FinishEvent(
                reason,
                tail,
                seq.num_prompt,
                seq.num_generated,
                seq.num_cached,
                error=error,
                state=state,
            )
        )
