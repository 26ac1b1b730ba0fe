"""A StepPlan into one llama batch and one llama_decode; the step's time and size to metrics."""

from __future__ import annotations

import time

from reame import metrics
from reame.engine.kv_context import KVContext
from reame.engine.plan import Logits, StepPlan
from reame.spec.controller import SpecController


class Runner:
    def __init__(self, context: KVContext, controller: SpecController | None = None) -> None:
        """`controller`: told each step's size and time, to judge whether drafts pay."""
        self.context = context
        self._controller = controller

    def run(self, plan: StepPlan) -> Logits:
        """Compute the plan's batch; the logits by batch index, valid until the next run.
        Raises reame.llama.DecodeError if llama.cpp refuses the batch."""
        tokens, positions, seq_ids, wants = plan.batch()
        started = time.perf_counter()
        self.context.decode(tokens, positions, seq_ids, wants)
        seconds = time.perf_counter() - started
        metrics.STEP_SECONDS.observe(seconds)
        metrics.STEP_SEQUENCES.observe(len(plan.parts))
        if num_prompt := sum(p.num_prompt_tokens for p in plan.parts):
            metrics.PROMPT_TOKENS_COMPUTED.inc(num_prompt)
        if self._controller is not None:
            self._controller.record_step(len(tokens), seconds)
        return self.context.logits
