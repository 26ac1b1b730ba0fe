"""A step: the KV moves decided since the last one (engine/kv_moves.py), then the StepPlan as
llama batches, one llama_decode for the parts of each size; the step's time and size to
metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from reame import metrics
from reame.engine.exact_steps import ExactPaths, call_is_exact
from reame.engine.kv_context import KVContext
from reame.engine.kv_moves import KVMoves
from reame.engine.step_plan import Logits, StepPlan
from reame.llama.context import DecodeInterrupted
from reame.speculation.controller import SpecController


@dataclass(slots=True)
class StepOutput:
    logits: Logits  # by batch index, valid until the next run
    # by llama sequence id: the recurrent state before a verify run, where memory cannot be cut
    checkpoints: dict[int, bytearray] = field(default_factory=dict)


class Runner:
    def __init__(
        self,
        moves: KVMoves,
        paths: ExactPaths | None = None,
        controller: SpecController | None = None,
    ) -> None:
        """`moves`: the queue of KV moves it does first. `paths`: what computes as a lone
        sequence (a sequence computed otherwise is marked: Sequence.is_exact). `controller`:
        told each step's size and time, to judge whether drafts pay."""
        self.moves, self.context = moves, moves.context
        self.paths = paths if paths is not None else ExactPaths()
        self._controller = controller

    def run(self, plan: StepPlan, interrupt: Callable[[], bool] | None = None) -> StepOutput | None:
        """Do the queued KV moves, then compute the plan's batch; None, computing nothing, if a
        move failed on a sequence of the plan (the scheduler starts it over, moves.take_lost,
        and plans again). Where memory cannot be cut back, each verify run's sequence is
        checkpointed first, so that refused drafts can be rolled back. Raises
        reame.llama.context.DecodeError if llama.cpp refuses the batch. `interrupt`: the step
        stops once it says so (DecodeInterrupted), every part's KV left as it was before its
        tokens (where memory can be cut)."""
        self.moves.do()
        if self.moves.has_lost(p.seq.slot for p in plan.parts):
            return None
        out = StepOutput(self.context.logits)
        for part in plan.parts:
            if part.start < part.seq.num_computed:  # a widened chunk: its cells are computed anew
                self.context.remove(part.seq.slot, part.start)
        if not self.context.can_cut:
            started = time.perf_counter()
            for part in plan.parts:
                if part.is_verify:
                    out.checkpoints[part.seq.slot] = self.context.checkpoint(part.seq.slot)
            if out.checkpoints:
                seconds = (time.perf_counter() - started) / len(out.checkpoints)
                metrics.SPEC_CHECKPOINT_SECONDS.observe(seconds)
                if self._controller is not None:
                    self._controller.record_checkpoint(seconds)
        calls = [alone for call in plan.calls() for alone in self._as_alone(call)]
        started = time.perf_counter()
        if interrupt is not None:
            self.context.interrupt_when(interrupt)
        try:
            for call, is_exact in calls:
                if not is_exact:
                    for part in call.parts:
                        part.seq.computed_otherwise()
                self.context.decode(*call.batch())
                if call is not calls[-1][0]:  # NOTE: the next decode overwrites the logits
                    out.logits = _kept(out.logits, self.context, call, copy=True)
        except DecodeInterrupted:
            for part in plan.parts:  # NOTE: an earlier call's too: nothing of the step stays
                self.context.remove(part.seq.slot, part.start)
            raise
        finally:
            if interrupt is not None:
                self.context.interrupt_when(None)
        if len(calls) > 1:
            out.logits = _kept(out.logits, self.context, calls[-1][0], copy=False)
        seconds = time.perf_counter() - started
        metrics.STEP_SECONDS.observe(seconds)
        metrics.STEP_SEQUENCES.observe(len(plan.parts))
        if num_prompt := sum(p.num_prompt_tokens for p in plan.parts):
            metrics.PROMPT_TOKENS_COMPUTED.inc(num_prompt)
        if self._controller is not None:
            self._controller.record_step(plan.num_tokens, seconds)
        return out

    def _as_alone(self, call: StepPlan) -> list[tuple[StepPlan, bool]]:
        """`call`, or one call per part where it holds a prompt chunk that would be computed
        otherwise than alone: a later request reuses a prompt's KV as its chunks computed it
        alone (exact_reuse; a chunk of 70 rows after another's 70 has its rows grouped from
        row 2 of a group of 4, where alone they are grouped from its first). Each with whether
        it computes as its sequences would alone (call_is_exact)."""
        is_exact = call_is_exact(call.parts, self.paths)
        if is_exact or not any(p.num_prompt_tokens for p in call.parts):
            return [(call, is_exact)]
        return [(StepPlan((p,)), call_is_exact((p,), self.paths)) for p in call.parts]


def _kept(earlier: Logits, context: KVContext, call: StepPlan, copy: bool) -> Logits:
    """The step's logits by its batch index: those of `call` (just decoded, its own batch
    numbering them from 0), copied if a later decode is to overwrite them; the rest as before."""
    local: dict[int, int] = {}
    row = 0
    for part in call.parts:
        for index in part.logit_rows():
            local[index] = row + index - part.first_row
        row += len(part.tokens)
    rows = {i: np.array(context.logits(r), copy=True) for i, r in local.items()} if copy else {}

    def logits(index: int) -> np.ndarray:
        if index in rows:
            return rows[index]
        return context.logits(local[index]) if index in local else earlier(index)

    return logits
