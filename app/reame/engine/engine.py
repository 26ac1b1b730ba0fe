"""The engine thread. Each turn of its loop is four calls: schedule (the inbox, admission
with its one reuse match, the step's plan), run (one llama_decode), update (the logits into
tokens and events, through the sequences' own methods), deliver (kept states, then events).

NOTE: the only thread that calls llama.cpp (the prefix cache's writer only writes files).
llama_decode releases the GIL, so the caller's event loop stays free while a step runs. Requests
come in through a thread-safe inbox; events go out through each request's sink, called on the
engine thread after each step. The request's one check, the places taken all or none, and the
thread's life (start, death, close) are the engine's edge, kept together.
"""

from __future__ import annotations

import math
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from reame import metrics
from reame.engine.exact_run import probe_paths, row_granule
from reame.engine.exact_steps import ExactPaths
from reame.engine.idle_gate import IdleGate
from reame.engine.intake import Abort, Hold, sequence_of
from reame.engine.kv_context import KVContext
from reame.engine.outbox import StateHook
from reame.engine.request import Finish, FinishEvent, GenerationRequest, Sink
from reame.engine.runner import Runner, StepOutput
from reame.engine.scheduler import Scheduler
from reame.engine.sequence import SeqState, Sequence
from reame.engine.step_plan import StepPlan
from reame.engine.update import Update
from reame.errors import EngineBusyError, EngineFailedError
from reame.llama.context import DecodeError, DecodeInterrupted
from reame.llama.model import Model
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation

log = structlog.get_logger("reame.engine")
SWITCH_INTERVAL_SECONDS = 0.001


@dataclass(frozen=True, slots=True)
class _Stop:
    until: float  # idle-time work already queued runs until then (time.monotonic())


STALLED_POLL_SECONDS = 0.1  # every request waits for its reader: the queue's time limit still runs


class Engine:
    """Continuous batching over one llama context: a request joins the running batch at the
    next step, a finished one leaves it, an aborted one frees its sequence at the next step."""

    def __init__(
        self,
        model: Model,
        context: KVContext,
        context_length: int,
        max_waiting: int = 64,
        on_state: StateHook | None = None,
        takes_snapshots: bool = False,
        speculation: Speculation | None = None,
        max_wait_seconds: float = 0.0,
        forced_runs: bool = True,
        exact_runs: bool = True,
        probes_paths: bool = False,
    ) -> None:
        """`max_wait_seconds`: a request still waiting for a sequence after this long is refused
        (finish reason "busy"), so no client hangs behind long answers; 0: it waits.
        `on_state`: where every state computed for reuse goes (engine/outbox.py Kept), on the
        engine thread; `takes_snapshots`: prompts' starts are kept too (the snapshot points of
        each request), and free sequences keep their prompts' KV for requests that start alike.
        `forced_runs`: the tokens a grammar forces go into one step together. `exact_runs`:
        verify runs no longer than this machine computes as one-token steps (measured here).
        `probes_paths`: measure that without speculation too (FinishEvent.is_exact needs it)."""
        self.model, self.context = model, context
        self.context_length = context_length
        self._max_in_flight = context.shape.num_sequences + max_waiting
        self._num_in_flight = 0
        self.idle = IdleGate()  # idle-time work never makes a request wait
        self._stops_at: float | None = None  # asked to stop: idle-time work runs until then
        self._in_flight_lock = threading.Lock()
        self._on_state = on_state
        self._spec = speculation
        self.paths = ExactPaths()  # what computes as a lone sequence's steps (probed at start)
        self.scheduler = Scheduler(
            context, context_length, takes_snapshots, speculation, max_wait_seconds, self.paths
        )
        self._probed: SpecController | None = None  # whose drafts the probe bounds, on start
        if speculation is not None:
            speculation.controller.uses_checkpoints = not context.can_cut
            self._probed = speculation.controller if exact_runs else None
        self._probes = probes_paths or self._probed is not None
        self._keeps_prompts = takes_snapshots
        moves = self.scheduler.moves
        self.runner = Runner(moves, self.paths, speculation.controller if speculation else None)
        self.update = Update(
            model,
            moves,
            self.scheduler,
            self._left,
            speculation,
            forced_runs,
            takes_snapshots=takes_snapshots,
            keeps_states=on_state is not None,
        )
        self._inbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._wake_hooks: tuple[weakref.WeakMethod[Callable[[], None]], ...] = ()
        self._wake_hooks_lock = threading.Lock()
        self._published = (-1, -1)  # running and waiting, as the gauges last showed them
        self.failure: str | None = None  # why the engine thread died; None while it serves
        self._death_hooks: list[Callable[[str], None]] = []
        self._thread = threading.Thread(target=self._run, name="reame-engine", daemon=True)
        self._started = threading.Event()

    # -- called from any thread -------------------------------------------------------------

    def start(self) -> None:
        """Start the engine thread; returns once its start-up probe ran (it raises
        EngineFailedError if the probe failed)."""
        # NOTE: after each llama_decode the engine thread needs the GIL back at once; with the
        # default 5 ms switch interval a busy event loop thread can hold it through a whole step
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
        self._thread.start()
        self._started.wait()
        if self.failure is not None:
            raise EngineFailedError(self.failure)

    def submit(self, request: GenerationRequest, sink: Sink) -> None:
        """Queue a request; raises InvalidRequestError at once if it can never be served, and
        EngineBusyError if every running and waiting place is taken."""
        self.submit_all([request], [sink])

    def submit_all(self, requests: list[GenerationRequest], sinks: list[Sink]) -> None:
        """Queue requests all or none: each is checked, then places for all are taken."""
        seqs = [self._sequence(r, s) for r, s in zip(requests, sinks, strict=True)]
        self._enter(seqs, len(seqs))

    def _sequence(self, request: GenerationRequest, sink: Sink) -> Sequence:
        return sequence_of(
            request,
            sink,
            self.model.vocab_size,
            self.context_length,
            self._spec,
            self.update.takes_snapshots,
        )

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
        leader.lead(followers)
        self._enter([leader], len(seqs))

    def _enter(self, seqs: list[Sequence], count: int) -> None:
        now = time.monotonic()
        with self._in_flight_lock:
            if self.failure is not None:
                raise EngineFailedError(self.failure)
            if self._num_in_flight + count > self._max_in_flight:
                raise EngineBusyError(
                    f"all {self._max_in_flight} request places are taken; retry shortly"
                )
            self._num_in_flight += count
        for seq in seqs:
            seq.queued(now)
            self._inbox.put(seq)
            if not seq.request.background:
                self.idle.submitted(seq.request.prompt)

    def _left(self) -> None:
        """A request ended (on the engine thread, before its finish event goes out)."""
        with self._in_flight_lock:
            self._num_in_flight -= 1
        self._publish_counts()  # NOTE: before the event, so a caller that saw it sees the count

    @property
    def max_places(self) -> int:
        """Requests running and waiting at most: a request that needs more never fits."""
        return self._max_in_flight

    @property
    def num_free_places(self) -> int:
        """Requests that would be accepted now (a hint: others may race)."""
        return self._max_in_flight - self._num_in_flight

    def add_wake_hook(self, hook: Callable[[], None]) -> None:
        """`hook` (a bound method, held weakly) runs on the engine thread whenever it is about
        to leave Python, into a llama_decode, a read of prefix states or a wait for work: the
        moment to wake a consumer of the events emitted so far. Woken earlier, the consumer
        would hold the GIL while the engine still needs it to start the next step; woken then,
        it runs beside the decode."""
        with self._wake_hooks_lock:
            alive = tuple(ref for ref in self._wake_hooks if ref() is not None)
            self._wake_hooks = (*alive, weakref.WeakMethod(hook))

    @property
    def num_running(self) -> int:
        return len(self.scheduler.running)

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
        self._inbox.put(Abort(request_id))

    def hold(self, request_id: str, held: bool) -> None:
        """Stop computing a request whose reader fell behind (held), or go on (not held)."""
        self._inbox.put(Hold(request_id, held))

    def close(self, timeout: float = 30.0, work_seconds: float = 0.0) -> bool:
        """Stop the engine thread (requests still in it end as aborted); False if it is still
        inside llama.cpp after `timeout` more: then nothing it uses may be freed.
        `work_seconds`: where no request is in, the idle-time work queued (a history computed
        ahead, warm-ahead) runs for up to this long first, so that what it computes outlives
        the process (the next turn after a restart finds it stored)."""
        if self._thread.is_alive():
            self._inbox.put(_Stop(time.monotonic() + work_seconds))
            self._thread.join(timeout + work_seconds)
        return not self._thread.is_alive()

    # -- the engine thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            # NOTE: the probe decodes, so it runs here, not on the caller's thread: libgomp gives
            # each thread that calls llama_decode a team of its own, and once the teams' threads
            # outnumber the cores, they sleep at every barrier instead of spinning (measured
            # with the probe on the caller's thread: 1-token steps 19 ms instead of 11)
            if self._probes:  # NOTE: into the runner's paths, in place
                probe_paths(self.context, self._probed, self.paths)
            if (self._keeps_prompts or self._probes) and self.context.can_cut:
                granule = row_granule(self.context)
                self.paths.granule = granule
                log.info("row groups measured", granule=granule)
        except BaseException as exc:
            self._die(f"the engine's start-up probe failed: {type(exc).__name__}: {exc}")
        finally:
            self._started.set()
        if self.failure is not None:
            return
        try:
            self._serve()
        except BaseException as exc:  # NOTE: anything that escapes the loop ends the engine
            self._die(f"the engine thread died: {type(exc).__name__}: {exc}")

    def _serve(self) -> None:
        while self._turn():
            pass
        update = self.update
        for seq in self.scheduler.everyone():
            update.finish(seq, Finish.ABORT)
        for seq in list(self.scheduler.warming):  # what they computed outlives the process
            update.warmed(seq)
        update.out.deliver(self._on_state)
        self._wake_consumers()

    def _turn(self) -> bool:
        """One turn of the loop: schedule (the inbox, admission, the plan), compute, update,
        deliver; False once asked to stop. (A method, so that nothing of the plan outlives
        it while the loop waits for work.)"""
        plan = self._schedule()
        if plan is None:
            return False
        if not plan and self._stops_at is not None and not self.scheduler.background:
            return False  # stopping, and the idle-time work is done
        if plan:
            began = time.perf_counter()
            is_warm = plan.parts[0].seq.state is SeqState.WARMING  # NOTE: they run alone
            output = self._compute(plan)
            if output is not None:
                self._update(plan, output)
            if is_warm:  # the step and the states it saved (or as far as it went: stopped)
                self.update.warm_gauge.spent(time.perf_counter() - began)
        # NOTE: a final state's read (190 ms at the Qwen3 1.7B shape) waits for a first token
        waits = self.idle.holds or not self._inbox.empty() or self.scheduler.first_token_waits
        self._deliver(finals=not (plan and waits))
        return True

    def _schedule(self) -> StepPlan | None:
        """Wait for work if there is none; take the inbox (requests, aborts, holds); free the
        warming slots the queue needs and admit (the update applies what admission decided);
        then the step's plan (empty: nothing to compute). None once asked to stop."""
        scheduler, update = self.scheduler, self.update
        now = time.monotonic()
        closing = self._stops_at is not None
        if closing and now >= self._stops_at:
            return None
        if not scheduler.has_requests:
            update.warm_gauge.idle(now)
        scheduler.holds_idle_work = self.idle.holds
        idle_for = math.inf if closing else update.warm_gauge.idle_for(now)
        wait = scheduler.background_wait(idle_for)
        is_idle = scheduler.is_idle
        if is_idle and closing:  # the idle-time work is done
            return None
        if scheduler.is_stalled:
            is_idle, wait = True, STALLED_POLL_SECONDS
        if is_idle:  # NOTE: the gauges too: no step may come to publish them for a while
            self._publish_counts()
            self._wake_consumers()
        if not self._take_inbox(block=is_idle, timeout=wait or None):
            return None
        scheduler.lost(scheduler.moves.take_lost())  # NOTE: a read may have done moves
        update.yield_warm()
        update.admitted(scheduler.admit(time.monotonic()))
        self._publish_counts()
        if not (scheduler.running or scheduler.warming):
            return StepPlan(())
        return scheduler.schedule()

    def _compute(self, plan: StepPlan) -> StepOutput | None:
        """The step's KV moves and its llama_decode; None if nothing was computed (a move
        failed: its sequences start over) or the decode failed (its sequences ended with the
        error)."""
        self._wake_consumers()
        idle = all(p.seq.state is SeqState.WARMING or p.seq.request.background for p in plan.parts)
        # NOTE: where memory cannot be cut, llama.cpp could not take a stopped batch back out
        stops = idle and self.context.can_cut
        work = tuple(p.seq.tokens[: p.start + len(p.tokens)] for p in plan.parts) if stops else ()
        try:
            with self.idle.under_way(work):
                return self.runner.run(plan, self.idle.stops if stops else None)
        except DecodeInterrupted:
            self.scheduler.interrupted(plan, self._anew)
            return None
        except DecodeError as exc:
            self.update.failed(plan, str(exc))
            return None
        finally:
            self.scheduler.lost(self.scheduler.moves.take_lost())

    def _anew(self, seq: Sequence) -> Sequence:
        """A new sequence for `seq`'s request, queued when it was."""
        fresh = self._sequence(seq.request, seq.sink)
        fresh.queued(seq.queued_at)
        return fresh

    def _update(self, plan: StepPlan, output: StepOutput) -> None:
        try:
            self.update.apply(plan, output)
        except Exception as exc:  # never let one bad step kill the server
            log.exception("engine step failed")
            for seq in list(self.scheduler.running):
                self.update.finish(seq, Finish.ERROR, error=str(exc))

    def _deliver(self, finals: bool = True) -> None:
        """The step's kept states and events out; then the states it noted are read while its
        events are on their way (a read is 20-170 ms no first token should wait for), and go
        out too; `finals`: answers' final states too (else they wait, their sequences warming)."""
        update = self.update
        update.out.deliver(self._on_state)
        if update.has_reads_due:
            self._wake_consumers()
            update.read_due(finals)
            update.out.deliver(self._on_state)

    def _take_inbox(self, block: bool, timeout: float | None = None) -> bool:
        """Move messages from the inbox into engine state (waiting for one if `block`, at most
        `timeout` seconds); False once asked to stop."""
        self.idle.taken()
        try:
            msg = self._inbox.get(timeout=timeout) if block else None
        except queue.Empty:
            return True
        while True:
            if isinstance(msg, _Stop):
                if msg.until <= time.monotonic() or self.scheduler.serves_requests:
                    return False
                self._stops_at = msg.until
                self.idle.ends_at(msg.until)
            if isinstance(msg, Sequence):
                if not msg.request.background:
                    self.update.warm_gauge.arrived(msg.queued_at)
                if (dropped := self.scheduler.add(msg)) is not None:
                    self.update.finish(dropped, Finish.ABORT)
            elif isinstance(msg, Abort) and (seq := self.scheduler.abort(msg.request_id)):
                self.update.finish(seq, Finish.ABORT)
            elif isinstance(msg, Hold):
                self.scheduler.hold(msg.request_id, msg.held)
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _wake_consumers(self) -> None:
        for ref in self._wake_hooks:
            hook = ref()
            if hook is not None:
                hook()

    def _publish_counts(self) -> None:
        counts = (len(self.scheduler.running), len(self.scheduler.waiting))
        if counts != self._published:
            self._published = counts
            metrics.RUNNING.set(counts[0])
            metrics.WAITING.set(counts[1])

    def _die(self, reason: str) -> None:
        """No request may hang on a dead engine: every one in it, or on its way in, ends with
        the reason; later submissions are refused; the hooks tell the server."""
        log.critical("engine thread died", reason=reason, exc_info=True)
        with self._in_flight_lock:
            self.failure = reason
            hooks = list(self._death_hooks)
        seqs = self.scheduler.everyone()
        while True:
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                break
            if isinstance(msg, Sequence):
                seqs.append(msg)
        for seq in seqs:
            for one in [seq, *seq.forks]:
                event = FinishEvent(Finish.ERROR, "", one.num_prompt, 0, error=reason)
                self.update.out.events.append((one, event))
        self.scheduler.clear()
        self.update.out.deliver(None)
        self._wake_consumers()
        for hook in hooks:
            try:
                hook(reason)
            except Exception:
                log.exception("an engine death hook failed")
