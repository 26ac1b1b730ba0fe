"""After a step: the plan and its logits become tokens taken (each by engine/taking.py), drafts
kept or rolled back, forks started, snapshots due and finishes, all as events in an Outbox.
Engine thread only."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import structlog

from reame import metrics
from reame.engine.kv_moves import Copy, Cut, Empty, KVMoves, Restore, Rollback
from reame.engine.outbox import Kept, Outbox
from reame.engine.request import Finish, FinishEvent
from reame.engine.runner import StepOutput
from reame.engine.scheduler import Admission, LateFork, Scheduler
from reame.engine.sequence import SeqState, Sequence
from reame.engine.step_plan import Part, StepPlan
from reame.engine.taking import Taker
from reame.engine.warm_ahead import WarmGauge, warm_tail
from reame.errors import GrammarFailedError
from reame.grammar.decoding import mask_at, take_forced
from reame.llama.model import Model
from reame.speculation.kit import Speculation

log = structlog.get_logger("reame.engine")


class Update:
    def __init__(
        self,
        model: Model,
        moves: KVMoves,
        scheduler: Scheduler,
        on_finished: Callable[[], None],
        speculation: Speculation | None = None,
        forced_runs: bool = True,
        takes_snapshots: bool = False,
        keeps_states: bool = False,
    ) -> None:
        """`on_finished`: called as each request ends, before its finish event goes out.
        `forced_runs`: the tokens a grammar forces go into one step together (else one a
        step, as a sampled token would)."""
        # NOTE: what it does to the KV is queued (the runner does it before the next batch or
        # read), decided here: its reads see it done
        self.model, self.moves, self.scheduler = model, moves, scheduler
        self.context_length = scheduler.context_length
        self._on_finished = on_finished
        self._spec = speculation
        self._forced_runs = forced_runs
        self.takes_snapshots = takes_snapshots
        self._keeps_states = keeps_states  # a final state has somewhere to go
        self.out = Outbox()
        self.warm_gauge = WarmGauge()  # the engine loop feeds it
        self._taker = Taker(model, self.context_length, forced_runs)
        # NOTE: a 1.5k-token state takes 20-170 ms to read (fresh pages, measured): states are
        # read after the step's events went out, not on the way to a first token or a finish
        self._snapshots_due: list[Sequence] = []
        self._finals_due: list[Sequence] = []

    # -- around a step ----------------------------------------------------------------------

    def admitted(self, admission: Admission) -> None:
        """Apply what admission decided: final states read that a request going on would
        lose, ends, late candidates started, forced first runs."""
        for warm, slot in admission.taken_over:
            self._read_taken_over(warm, slot)
        for seq in admission.aborted:
            self.finish(seq, Finish.ABORT)
        for seq in admission.too_old:
            waited = f"waited {self.scheduler.max_wait:g} s for a free sequence; retry shortly"
            self.finish(seq, Finish.BUSY, error=waited)
        for late in admission.late:
            self._start_late(late)
        for seq in admission.admitted:
            if seq.num_computed == seq.num_prompt and seq.prompt_logits is not None:
                self._advance_known(seq, seq.prompt_logits)
            elif seq.constraint is not None and not seq.forks and self._forced_runs:
                self._force_first(seq)

    def apply(self, plan: StepPlan, output: StepOutput) -> None:
        """The step ran: what it computed is in the KV cache; sample, verify, fork."""
        logits = output.logits
        for part in plan.parts:
            seq = part.seq
            seq.computed(part.start, part.end)
            self.out.release_early(seq)
            if seq.snapshots_due:
                self._snapshot(seq)
        for part in plan.parts:
            seq = part.seq
            if seq.state is SeqState.WARMING:
                metrics.WARM_AHEAD_TOKENS.inc(len(part.tokens))
                if seq.num_computed == len(seq.tokens):
                    self.warmed(seq)
                continue
            if not part.wants_logits:
                continue
            try:
                if seq.drafts:
                    self._verify(seq, part, output)
                else:
                    row = part.logit_rows()[0]
                    if seq.num_generated == 0:
                        seq.prompt_computed(logits(row))
                    if seq.forks:
                        self._fork(seq, logits(row))
                    self._advance(seq, logits(row))
            except Exception as exc:
                self._fail_alone(seq, exc, "the next token could not be picked")

    def failed(self, plan: StepPlan, error: str) -> None:
        """The step could not run: every sequence in it ends with the error."""
        for part in plan.parts:
            if part.seq in self.scheduler.running:
                self.finish(part.seq, Finish.ERROR, error=error)
            elif part.seq.state is SeqState.WARMING:
                self.scheduler.release(part.seq, keep_prompt=False)

    # -- one sequence -----------------------------------------------------------------------

    def _force_first(self, seq: Sequence) -> None:
        """What the grammar forces before any choice is computed with the prompt."""
        seq.hold_events()
        try:
            reason = self._taker.run(seq, take_forced(seq, whole_run=True), self.out)
        except Exception as exc:  # NOTE: what one request asked for fails that one alone
            self._fail_alone(seq, exc, "the grammar failed")
            return
        if reason is not None:
            self.finish(seq, reason)

    def _fail_alone(self, seq: Sequence, exc: Exception, why: str) -> None:
        """A failure of what one request asked for (its grammar, its sampling) ends that
        request alone; one its grammar caused is told to its client (a 400)."""
        if seq not in self.scheduler.running:
            return
        if isinstance(exc, GrammarFailedError):
            log.info("grammar failed", request_id=seq.request.request_id, reason=str(exc))
            self.finish(seq, Finish.ERROR, error=str(exc), is_request_fault=True)
            return
        log.exception(why, request_id=seq.request.request_id)
        error = f"{why} ({type(exc).__name__}); the server log has the details"
        self.finish(seq, Finish.ERROR, error=error)

    def _verify(self, seq: Sequence, part: Part, output: StepOutput) -> None:
        """Keep the drafts the model agrees with and its own next token; roll the rest back."""
        drafts, parts = seq.take_drafts(part.num_drafts)  # the budget may have cut the run short
        rows, logits = part.logit_rows(), output.logits
        allowed_at = mask_at(seq, drafts) if seq.constraint else None
        kept = seq.sampler.verify(drafts, lambda i: logits(rows[i]), seq.tokens, allowed_at)
        accepted = len(kept) - 1
        assert self._spec is not None  # only a sequence with drafters has drafts
        self._spec.booked(parts, len(drafts), accepted, seq.draft_stats)
        reason, taken = None, 0
        thought = seq.thought
        for sampled in kept:
            taken += 1
            phase = thought.phase if thought is not None else None
            reason = self._taker.take(seq, sampled, self.out)
            if reason is not None or (thought is not None and thought.phase is not phase):
                break  # NOTE: past a thought's end, the drafts were not the answer's grammar's
        answered = min(taken, accepted)  # NOTE: a kept draft after the answer's end is not in it
        seq.verified(answered, len(drafts) - answered)
        if reason is None and self._forced_runs:
            reason = self._taker.run(seq, take_forced(seq, whole_run=True), self.out)
        # NOTE: the KV cache holds the decode token and the drafts kept as they were computed,
        # up to the first token taken otherwise (a closing run written in a draft's place)
        computed = part.start + 1
        while computed <= part.start + accepted and computed < len(seq.tokens):
            if seq.tokens[computed] != drafts[computed - part.start - 1]:
                break
            computed += 1
        # NOTE: at least the last token stays to compute, whose logits pick the next (a run
        # cut at a thought's end leaves a kept draft last)
        seq.computed_to(min(computed, len(seq.tokens) - 1))
        if seq.num_computed < part.end and self.moves.can_cut:
            self.moves.add(Cut(seq.slot, seq.num_computed))
        elif seq.num_computed < part.end:
            self._roll_back(seq, part.start, output.checkpoints.get(seq.slot))
        if reason is not None:
            self.finish(seq, reason)

    def _roll_back(self, seq: Sequence, start: int, checkpoint: bytearray | None) -> None:
        """Memory that cannot be cut (recurrent layers) would keep the refused drafts: back to
        the checkpoint taken before the verify run, and the tokens kept are computed again in
        the next step (a replay); without one, the sequence is computed again from its first
        token. Never does it go on from a wrong state."""
        replayed = seq.num_computed - start
        if checkpoint is not None:
            self.moves.add(Rollback(seq.slot, checkpoint, start))
            seq.computed_to(start)
        else:
            self.moves.add(Empty(seq.slot))
            seq.restart()
            replayed = len(seq.tokens) - 1
        metrics.SPEC_REPLAYED.inc(replayed)
        if self._spec is not None:
            self._spec.controller.record_replay(replayed)

    def _snapshot(self, seq: Sequence) -> None:
        """Note the state to keep when the KV cache holds exactly the next snapshot point: the
        prompt up to there and nothing else. It is read by take_snapshots, after the step's
        events went out, or as the sequence ends if that comes first."""
        if seq.at_snapshot() and self.takes_snapshots:
            self._snapshots_due.append(seq)

    @property
    def has_reads_due(self) -> bool:
        return bool(self._snapshots_due or self._finals_due)

    def read_due(self, finals: bool = True) -> None:
        """Read the states noted in this step: snapshots, and the final states of answers with
        nothing to warm (kept as warm-ahead keeps its own, their slots then freed). Not
        `finals`: those wait, their sequences warming (a slot a request needs is yielded,
        read first; one a request goes on from is taken over)."""
        self.take_snapshots()
        if not finals:
            return
        finals, self._finals_due = self._finals_due, []
        for seq in finals:
            if seq.state is SeqState.WARMING:  # NOTE: not taken over or yielded meanwhile
                self.warmed(seq, counted=False)

    def take_snapshots(self, only: Sequence | None = None) -> None:
        """Read the noted states into the outbox: all of them, or `only` this sequence's. Its
        KV must not have changed since the step (no step, no cut, its slot not freed)."""
        taken = [s for s in self._snapshots_due if only is None or s is only]
        self._snapshots_due = [s for s in self._snapshots_due if not any(s is t for t in taken)]
        for seq in taken:
            data = self.moves.read(seq.slot)
            if data is not None:
                self.out.states.append(Kept(seq.saved(data), seq.request.scope))

    def _fork(self, leader: Sequence, logits: np.ndarray) -> None:
        """The leader's prompt is in its KV: each candidate gets a copy of it and samples its
        first token from the same logits, then runs on its own."""
        forks = leader.take_forks()
        for seq in [s for s in forks if s.is_aborted]:
            self.finish(seq, Finish.ABORT)
        forks = [s for s in forks if not s.is_aborted]
        if late := [s for s in forks if s.slot < 0]:
            forks = [s for s in forks if s.slot >= 0]
            state = self.moves.read(leader.slot)
            kept = logits.copy()
            for seq in late:
                if not leader.is_exact:
                    seq.computed_otherwise()
                if state is None:  # NOTE: the leader's own KV was lost: it starts over
                    self.finish(seq, Finish.ERROR, error="the prompt's state was lost")
                    continue
                late = LateFork(
                    seq,
                    state,
                    kept,
                    leader.num_computed,
                    tuple(leader.chunk_ends),
                    tuple(leader.chunks),
                )
                self.scheduler.wait_for_slot(late)
        if forks:
            self.moves.add(Copy(leader.slot, tuple(s.slot for s in forks)))
        for seq in forks:
            if not leader.is_exact:
                seq.computed_otherwise()
            seq.forked_from(leader.num_computed, leader.chunk_ends, leader.chunks)
            self.scheduler.start(seq)
            self._advance(seq, logits)

    def _start_late(self, late: LateFork) -> None:
        """A candidate given a free sequence: the prompt's state, then its first token."""
        seq = late.seq
        self.moves.add(Restore(seq.slot, late.state))
        seq.forked_from(late.num_computed, late.chunk_ends, late.chunks)
        try:
            self._advance(seq, late.logits)
        except Exception as exc:
            self._fail_alone(seq, exc, "the first token could not be picked")

    def _advance_known(self, seq: Sequence, logits: np.ndarray) -> None:
        """Its whole prompt was in a resident slot with its last logits: its first token,
        picked from a copy of them (the resident's stay as they were), no step computed."""
        metrics.PROMPTS_ANSWERED_WHOLE.inc()
        try:
            self._advance(seq, logits.copy())
        except Exception as exc:
            self._fail_alone(seq, exc, "the first token could not be picked")

    def _advance(self, seq: Sequence, logits: np.ndarray) -> None:
        """Take the token `logits` pick (and what the grammar forces after it); end the request
        if it ended there."""
        reason = self._taker.advance(seq, logits, self.out)
        if reason is not None:
            self.finish(seq, reason)

    def finish(
        self,
        seq: Sequence,
        reason: Finish,
        error: str | None = None,
        is_request_fault: bool = False,
    ) -> None:
        """End a request: its forks too, its slot freed, its state kept if it asked."""
        if any(s is seq for s in self._snapshots_due):  # before its slot lets go of the KV
            self.take_snapshots(seq)
        for fork in seq.take_forks():  # the leader ends before its prompt did: so do they
            self.finish(fork, reason, error, is_request_fault)
        request = seq.request
        keeps = (
            seq.slot >= 0
            and self._keeps_states
            and request.keep_state
            and seq.num_computed - seq.num_cached >= request.keep_state_min_new
            and reason.is_whole
        )
        warm = self._warm_tail(seq, reason) if keeps else None
        if keeps and warm is None:
            warm = []  # nothing to warm: its state is still read after the finish went out
        if warm is None:  # else it keeps its slot, to warm its next turn (below)
            # NOTE: a candidate of a group holds a slot it never ran in: nothing of it to keep
            self.scheduler.release(seq, keep_prompt=reason.is_whole and seq.num_computed > 0)
        if self._spec is not None and reason.is_whole:
            self._spec.learn(seq.tokens, seq.num_prompt, request.scope)
        self._on_finished()
        thought_tail, tail = "", ""
        if seq.thought is not None and reason.is_whole:
            rest = seq.thought.finish()
            thought_tail, tail = rest.reasoning, seq.text.push_text(rest.content).text
        tail += seq.text.finish() if reason.is_whole else ""
        self.out.release_early(seq)
        self.out.emit(
            seq,
            FinishEvent(
                reason,
                tail,
                seq.num_prompt,
                seq.num_generated,
                seq.num_cached,
                error=error,
                num_accepted_drafts=seq.num_drafts_kept,
                num_rejected_drafts=seq.num_drafts_refused,
                reasoning=thought_tail,
                num_reasoning_tokens=seq.thought.num_tokens if seq.thought else 0,
                is_request_fault=is_request_fault,
                stop_sequence=seq.text.stopped_by,
                is_exact=seq.is_exact,
            ),
        )
        if warm is not None:  # NOTE: after the event, which counts the tokens it took
            seq.to_warm(warm)
            self.scheduler.warm(seq)
            if not warm:
                self._finals_due.append(seq)

    # -- warm-ahead (engine/warm_ahead.py) ------------------------------------------------------

    def _warm_tail(self, seq: Sequence, reason: Finish) -> list[int] | None:
        """What to warm after this answer, None for nothing (the state is kept at once)."""
        request = seq.request
        if not request.warm_ahead or seq.forks:
            return None
        if not self.warm_gauge.pays:
            metrics.WARM_AHEAD.labels("skipped").inc()
            return None
        last = seq.tokens[-1] if seq.num_generated > 0 else -1
        ends_turn = reason is Finish.STOP and self.model.is_end_of_generation(last)
        grammar_done = seq.constraint is not None and seq.constraint.is_finished
        if reason is Finish.STOP and not ends_turn and not grammar_done:
            return None  # a stop string cut the text: the next prompt is not these tokens
        tail = warm_tail(seq.tokens[: seq.num_computed], seq.tokens, request.warm_ahead, ends_turn)
        if tail is None or seq.num_computed + len(tail) >= self.context_length:
            return None
        return tail

    def warmed(self, seq: Sequence, counted: bool = True) -> None:
        """A warming sequence's state is kept as far as it is computed (all of its work, or
        less when it yields), and its slot freed with all of that KV left for a request that
        starts alike. `counted`: in the warm-ahead metrics (not an answer with nothing to
        warm)."""
        is_done = seq.num_computed == len(seq.tokens)
        self._keep_final(seq, seq.slot)
        if counted:
            metrics.WARM_AHEAD.labels("kept" if is_done else "yielded").inc()
        seq.warmed()
        self.scheduler.release(seq, keep_prompt=True)

    def _keep_final(self, seq: Sequence, slot: int) -> None:
        """Read what `seq` computed, in `slot`, and keep it as an answer's final state."""
        data = self.moves.read(slot)
        if data is not None:
            state = seq.saved(data)
            self.out.states.append(Kept(state, seq.request.scope, True, seq.num_cached))
            self.scheduler.reuse.kept_final(state, seq.request.scope)

    def _read_taken_over(self, warm: Sequence, slot: int) -> None:
        """A request went on in `warm`'s slot before its final state was read (deferred for
        a first token). Where memory can be cut, the state stays reachable in the slot it is
        cut back from; where it cannot, it would be gone, so it is read now, before the request
        computes in the slot."""
        # NOTE: at the Qwen3.5 2B shape a next turn took its history's sequence over unread:
        # its own history, computed ahead, then went on from the answer before (220-228 tokens
        # where 122 would do; third turns 2.2-2.5 s: docs/replay/stop59-hybrid-takeover)
        if not any(s is warm for s in self._finals_due):
            return
        self._finals_due = [s for s in self._finals_due if s is not warm]
        if not self.moves.can_cut:
            self._keep_final(warm, slot)

    def yield_warm(self) -> None:
        """Free the slots a waiting request needs from warming sequences, oldest first."""
        for seq in self.scheduler.to_yield():
            self.warmed(seq)
