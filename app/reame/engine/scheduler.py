"""Who runs: the waiting queue, the running sequences, the llama sequences (slots) they hold,
and a group's candidates waiting for one; and what the next step computes (a StepPlan).
Engine thread only. It never emits an event: what it decides is applied by the update."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from reame import metrics
from reame.engine.drafting import add_drafts
from reame.engine.exact_steps import ExactPaths
from reame.engine.fair_admission import RecentOwners, next_admitted, yielding_owners
from reame.engine.kv_context import KVContext
from reame.engine.kv_moves import KVMoves
from reame.engine.reuse_index import Match, ReuseIndex
from reame.engine.sequence import SeqState, Sequence
from reame.engine.slots import Slots
from reame.engine.step_plan import StepPlan, make_plan
from reame.speculation.kit import Speculation

# NOTE: idle-time work starts once the engine has been idle this long: a client that sends its
# next request at once (back to back) finds no step of it in its way
BACKGROUND_AFTER_SECONDS = 0.05
# NOTE: how often the engine looks again while idle-time work waits for a request on its way in
# (its preparation is 5-10 ms; one that never comes, refused there, holds it no longer)
ARRIVING_POLL_SECONDS = 0.01


@dataclass(slots=True, frozen=True)
class LateFork:
    """A group's candidate that found no free sequence when its prompt was computed: it starts
    from the prompt's saved state and the logits after it once a sequence frees up."""

    seq: Sequence
    state: bytearray
    logits: np.ndarray
    num_computed: int
    chunk_ends: tuple[int, ...]
    chunks: tuple[tuple[int, int], ...]


@dataclass(slots=True)
class Admission:
    """What one admission decided, for the update to apply."""

    aborted: list[Sequence] = field(default_factory=list)  # end them now
    too_old: list[Sequence] = field(default_factory=list)  # waited past max_wait: busy
    admitted: list[Sequence] = field(default_factory=list)  # running from now on
    late: list[LateFork] = field(default_factory=list)  # given a slot: restore and start
    # warming sequences a request went on in, and their slots: what their KV holds is intact
    taken_over: list[tuple[Sequence, int]] = field(default_factory=list)


class Scheduler:
    def __init__(
        self,
        context: KVContext,
        context_length: int,
        keeps_prompts: bool,
        speculation: Speculation | None = None,
        max_wait_seconds: float = 0.0,
        paths: ExactPaths | None = None,
    ) -> None:
        self.context_length = context_length
        self.budget = context.shape.batch_size
        self.num_sequences = context.shape.num_sequences
        # the one place reuse is decided
        self.reuse = ReuseIndex(context.can_cut, self.budget, paths)
        # what placing, freeing and the update do to the KV, queued for the runner
        self.moves = KVMoves(context)
        self.slots = Slots(self.moves, keeps_prompts, self.reuse)
        # the queue's first request and its match, locked until it is admitted or not first
        self._head: tuple[Sequence, Match | None] | None = None
        self._can_widen = context.can_cut
        self.waiting: deque[Sequence] = deque()
        self.background: deque[Sequence] = deque()  # idle-time work, admitted after the rest
        self.background_ready = False  # the engine lets idle-time work start now
        # a request is on its way in (engine/idle_gate.py): no idle-time step starts, which it
        # would wait behind (0.7 s at the Qwen3 1.7B shape). NOTE: the engine copies the gate's
        # answer in once a turn, so that background_wait, is_idle and schedule agree: read live,
        # is_idle could say "wait" where background_wait gave no timeout, and warm-ahead would
        # then wait for the next request if the one on its way in was refused
        self.holds_idle_work = False
        self.late: deque[LateFork] = deque()  # first first
        self.running: list[Sequence] = []
        # answered sequences still in their slots, with the next turn's first tokens to compute
        # when nothing else runs (engine/warm_ahead.py); oldest first
        self.warming: list[Sequence] = []
        self._spec = speculation
        self.max_wait = max_wait_seconds
        self._recent = RecentOwners()  # keys with requests a moment ago keep their share
        self._num_steps = 0

    @property
    def has_requests(self) -> bool:
        """A request runs, waits, or waits for a slot (warm-ahead work is not one)."""
        return bool(self.running or self.waiting or self.late)

    @property
    def serves_requests(self) -> bool:
        """A request that is not idle-time work runs, waits, or waits for a slot."""
        running = any(not seq.request.background for seq in self.running)
        return bool(self.waiting or self.late) or running

    @property
    def first_token_waits(self) -> bool:
        """A request (not idle-time work) waits for its first token: queued, waiting for a
        slot, or its prompt not yet computed."""
        return bool(self.waiting or self.late) or any(
            s.num_generated == 0 and not s.request.background for s in self.running
        )

    @property
    def is_idle(self) -> bool:
        warms = bool(self.warming) and not self.holds_idle_work
        return not self.has_requests and not warms and not self._starts_background

    @property
    def _starts_background(self) -> bool:
        return bool(self.background) and self.background_ready

    def background_wait(self, idle_for: float) -> float | None:
        """How long idle-time work still waits, the engine idle for `idle_for` seconds (0: it
        may start, and background_ready says so); None: none waits. (No gauge as warm-ahead's:
        what it computes, a next turn would compute anyway, on its way to a first token.)"""
        wait = None
        if not self.has_requests and self.holds_idle_work and (self.background or self.warming):
            wait = ARRIVING_POLL_SECONDS
        elif not self.has_requests and self.background:
            wait = max(0.0, BACKGROUND_AFTER_SECONDS - idle_for)
        self.background_ready = wait == 0.0
        return wait

    def everyone(self) -> list[Sequence]:
        late = (late.seq for late in self.late)
        return [*self.running, *self.waiting, *late, *self.background]

    def add(self, seq: Sequence) -> Sequence | None:
        """Queue a request; returns idle-time work pushed out (end it now): at most one piece
        for each sequence waits, the oldest goes first (a busy server has no idle time)."""
        seq.state = SeqState.WAITING
        if not seq.request.background:
            self.waiting.append(seq)
            return None
        self.background.append(seq)
        return self.background.popleft() if len(self.background) > self.num_sequences else None

    def abort(self, request_id: str) -> Sequence | None:
        """A waiting request leaves the queue (returned: end it now); a running one, or a
        group's candidate, is marked and ends at the next admission."""
        for queue in (self.waiting, self.background):
            for seq in queue:
                if seq.request.request_id == request_id:
                    queue.remove(seq)
                    return seq
        for late in self.late:
            if late.seq.request.request_id == request_id:
                self.late.remove(late)
                return late.seq
        for seq in [*self.running, *self.waiting]:
            for one in [seq, *seq.forks]:
                if one.request.request_id == request_id:
                    one.is_aborted = True
        return None

    def hold(self, request_id: str, held: bool) -> None:
        """A request whose reader stopped taking its tokens computes nothing until it reads
        again; it keeps its place (its write timeout ends it)."""
        for seq in [*self.running, *self.waiting]:
            for one in [seq, *seq.forks]:
                if one.request.request_id == request_id:
                    one.is_paused = held

    @property
    def is_stalled(self) -> bool:
        """Requests run, and every one waits for its reader: there is no step to take."""
        return bool(self.running) and all(s.is_paused for s in self.running)

    def admit(self, now: float) -> Admission:
        """Aborted sequences out, requests that waited too long refused, the queue's first
        request matched (engine/reuse_index.py), then free sequences to the candidates waiting
        for one, then to the queue in order."""
        out = Admission(aborted=[s for s in self.running if s.is_aborted])
        self._recent.saw((s.request.owner for s in [*self.running, *self.waiting]), now)
        for seq in out.aborted:  # NOTE: their sequences are free for this admission already
            for one in [seq, *seq.forks]:
                self.release(one, keep_prompt=False)
        if self.max_wait > 0:
            out.too_old = [s for s in self.waiting if s.queued_at < now - self.max_wait]
            for seq in out.too_old:
                self.waiting.remove(seq)
        self._match_head()
        while self.late and self.slots.num_unlocked > 0:
            late = self.late.popleft()
            late.seq.slot = self.slots.take_empty()
            self.start(late.seq)
            out.late.append(late)
        # NOTE: every slot owns a full context of KV cells, so a free slot is all it takes (a
        # group takes one for each of its sequences at once, or every sequence if it is larger:
        # the rest start from its prompt's state later; the queue waits behind it)
        while (seq := self._next()) is not None and self._fits(seq):
            self.waiting.remove(seq)
            if (taken := self._place(seq, self._take_head(seq))) is not None:
                out.taken_over.append(taken)
            for fork in seq.forks:
                if self.slots.num_unlocked:
                    fork.slot = self.slots.take_empty()
            out.admitted.append(seq)
        # NOTE: idle-time work takes a slot only when no request runs or waits for one
        if (
            self._starts_background
            and not self.running
            and not self.waiting
            and self.slots.num_free
        ):
            seq = self.background.popleft()
            if (taken := self._place(seq, self._match(seq))) is not None:
                out.taken_over.append(taken)
            out.admitted.append(seq)
        return out

    def _match_head(self) -> Match | None:
        """Match the queue's first request afresh, and lock what it matched (a resident slot
        stays; a warming sequence does not yield), the last match unlocked."""
        if self._head is not None:
            self.reuse.unlock(self._head[1])
            self._head = None
        seq = self._next()
        if seq is None:
            return None
        match = self._match(seq)
        self.reuse.lock(match)
        self._head = (seq, match)
        return match

    def _match(self, seq: Sequence) -> Match | None:
        """Where `seq` goes on from, now (an empty free slot lets a stored state be restored
        rather than another conversation cut back)."""
        return self.reuse.match(seq, self.warming, self.slots.has_empty)

    def _fits(self, seq: Sequence) -> bool:
        """Enough sequences are free for `seq` (the warming one it goes on in counts)."""
        free = self.slots.num_free
        if self._head is not None and self._head[0] is seq:
            free += self._head[1] is not None and self._head[1].tier == "warming"
        return free >= _width(seq, self.num_sequences)

    def _take_head(self, seq: Sequence) -> Match | None:
        """`seq`'s match: the locked one if it is the head, unlocked now; else a fresh one."""
        if self._head is None or self._head[0] is not seq:
            return self._match(seq)
        match = self._head[1]
        self.reuse.unlock(match)
        self._head = None
        return match

    def _place(self, seq: Sequence, match: Match | None) -> tuple[Sequence, int] | None:
        """Put an admitted sequence where its match says, and start it: a warming sequence's
        slot is taken over (nothing copied; what warm-ahead had not computed yet it computes
        as its own prompt), else Slots.place. The warming sequence taken over and its slot, if
        one was."""
        taken = None
        if match is not None and match.tier == "warming":
            warm = next(w for w in self.warming if w.slot == match.slot)
            self.warming.remove(warm)
            warm.slot, warm.state = -1, SeqState.FINISHED
            self.slots.go_on(seq, match.slot, match)
            metrics.WARM_AHEAD.labels("taken_over").inc()
            taken = (warm, match.slot)
        else:
            self.slots.place(seq, match)
        self.start(seq)
        return taken

    def _next(self) -> Sequence | None:
        """The waiting request a free sequence goes to (engine/fair_admission.py)."""
        running = [s.request.owner for s in self.running for _ in range(1 + len(s.forks))]
        owners = [s.request.owner for s in self.waiting]
        at = next_admitted(owners, running, self.num_sequences, self._recent)
        return self.waiting[at] if at is not None else None

    def to_yield(self) -> list[Sequence]:
        """The warming sequences that give their slots up for the queue's first request, oldest
        first: as many as it needs, never the one it goes on from."""
        seq = self._next()
        if seq is None:
            return []
        need = _width(seq, self.num_sequences) - self.slots.num_free
        if need <= 0:
            return []
        match = self._match_head()
        if match is not None and match.tier == "warming":
            need -= 1  # NOTE: it goes on in that one's slot
        return [w for w in self.warming if not self.reuse.is_locked(w.slot)][:need]

    def interrupted(self, plan: StepPlan, again: Callable[[Sequence], Sequence]) -> None:
        """An idle-time step was stopped for a request that came, none of it kept: its warming
        sequences go on from where they were; its idle-time requests give their slots up (what
        they went on from stays there) and wait again, first, made anew by `again`."""
        metrics.IDLE_STEPS_INTERRUPTED.inc()
        for part in plan.parts:
            seq = part.seq
            seq.interrupted(part.start)
            if seq.request.background:
                self.release(seq, keep_prompt=True)
                fresh = again(seq)
                fresh.state = SeqState.WAITING
                self.background.appendleft(fresh)

    def warm(self, seq: Sequence) -> None:
        """An answered sequence stays in its slot to warm its next turn ahead."""
        if seq in self.running:
            self.running.remove(seq)
        seq.state = SeqState.WARMING
        self.warming.append(seq)

    def start(self, seq: Sequence) -> None:
        """A sequence that holds a slot joins the running batch."""
        seq.state = SeqState.RUNNING
        self.running.append(seq)

    def wait_for_slot(self, late: LateFork) -> None:
        late.seq.state = SeqState.FORK_WAITING
        self.late.append(late)

    def schedule(self) -> StepPlan:
        """The next step: drafts for the decoding sequences that can verify them, then every
        running sequence's missing tokens packed into the token budget."""
        if not self.running:  # NOTE: warm-ahead only where no request is running or waiting
            if self.waiting or self.holds_idle_work:
                return StepPlan(())
            return make_plan(self.warming, self.budget, self._can_widen)
        runnable = self._runnable()
        if self._spec is not None:
            add_drafts(self._spec, runnable, self.context_length)
        return make_plan(runnable, self.budget, self._can_widen)

    def _runnable(self) -> list[Sequence]:
        """The running sequences this step computes: not those waiting for their reader, and
        every other step not those of a key that asks past its share beside one within its own
        (engine/fair_admission.py), unless nothing else would run."""
        runnable = [s for s in self.running if not s.is_paused]
        self._num_steps += 1
        if self._num_steps % 2:
            return runnable
        running = [s.request.owner for s in self.running for _ in range(1 + len(s.forks))]
        owners = [s.request.owner for s in self.waiting]
        slowed = yielding_owners(owners, running, self.num_sequences, self._recent)
        rest = [s for s in runnable if s.request.owner not in slowed]
        return rest or runnable

    def release(self, seq: Sequence, keep_prompt: bool) -> None:
        """A sequence leaves: its slot is freed (with `keep_prompt`, its prompt's KV stays in
        it for a request that starts alike)."""
        if seq.slot >= 0:
            self.slots.release(seq, keep_prompt)
        if seq in self.running:
            self.running.remove(seq)
        if seq in self.warming:
            self.warming.remove(seq)
        seq.state = SeqState.FINISHED

    def lost(self, slots: set[int]) -> None:
        """Moves on these slots failed and emptied them (engine/kv_moves.py): what a free one
        held is forgotten, and a sequence in one computes everything again."""
        for slot in slots:
            self.slots.lost(slot)
        for seq in [*self.running, *self.warming]:
            if seq.slot in slots:
                replayed = len(seq.tokens) - 1
                seq.emptied()
                # NOTE: as a refused drafts' rollback: what drafting costs where cuts fail
                metrics.SPEC_REPLAYED.inc(replayed)
                if self._spec is not None:
                    self._spec.controller.record_replay(replayed)

    def clear(self) -> None:
        self.running.clear()
        self.warming.clear()
        self.waiting.clear()
        self.background.clear()
        self.late.clear()


def _width(seq: Sequence, num_sequences: int) -> int:
    """The free sequences a request needs to start: one for each of its group's."""
    return min(1 + len(seq.forks), num_sequences)
