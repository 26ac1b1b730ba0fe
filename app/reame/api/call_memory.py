"""A call's part in the answer memory (answer_memory.py): its key, the answer it found there, or
the events it saw, kept once the call ends whole and exact. The key is made and looked up off the
event loop (in Call._prepare); the keeping runs off it too, after the answer went out."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncGenerator, Sequence

from reame import metrics
from reame.answer_memory import AnswerMemory
from reame.api.answer_key import ServerSide, answer_key
from reame.api.remembered import (
    choices_record,
    is_determined,
    recalled_choices,
    recalled_verdict,
    replay,
    verdict_record,
    why_not_kept,
)
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.conclave.convene import Verdict
from reame.engine.request import Event, FinishEvent
from reame.loop_inbox import ChoiceEvent
from reame.service import Job

_BACKGROUND: set[asyncio.Task] = set()  # NOTE: the loop holds tasks weakly


class CallMemory:
    def __init__(
        self,
        memory: AnswerMemory,
        server: ServerSide,
        body: ChatRequest | CompletionRequest,
        session_id: str | None,
        vocab_size: int,
    ) -> None:
        self.memory, self.server, self.body = memory, server, body
        self.session_id, self.vocab_size = session_id, vocab_size
        self.key: str | None = None  # set for a determined call
        self.choices: list[list[Event]] | None = None  # a hit's events, by choice
        self.verdict: Verdict | None = None  # a hit's Conclave
        self._seen: defaultdict[int, list[Event]] = defaultdict(list)

    @property
    def is_hit(self) -> bool:
        return self.choices is not None or self.verdict is not None

    def look_up(self, jobs: Sequence[Job], runs: Sequence[Job], extra: object) -> bool:
        """Whether the answer of `jobs` (run as `runs`: a Conclave's candidates) is in memory;
        nothing is looked up for a call whose answer is not determined. Off the event loop."""
        if not is_determined(runs):
            return False
        self.key = answer_key(self.body, jobs, self.server, self.session_id, extra)
        record = self.memory.recall(self.key, self.server.scope)
        if record is not None:
            self.choices = recalled_choices(record, self.vocab_size)
            self.verdict = recalled_verdict(record, self.vocab_size)
        return self.is_hit

    def stream(self) -> AsyncGenerator[list[ChoiceEvent]]:
        """The hit's answer as the engine's stream gives one (a Conclave's: accepted only)."""
        return replay(self.choices or ())

    def saw(self, index: int, event: Event) -> None:
        if self.key is not None and not self.is_hit:
            self._seen[index].append(event)

    def keep(self, num_choices: int, verdict: Verdict | None) -> None:
        """Keep the answer the call computed if it may be kept (in the background)."""
        if self.key is None or self.is_hit:
            return
        if verdict is not None:
            finishes = [c.finish for c in verdict.candidates if c.finish is not None]
            reason = "failed" if verdict.failed is not None else why_not_kept(finishes)
            record = verdict_record(verdict)
        else:
            seen = [self._seen.get(i, []) for i in range(num_choices)]
            last = [e[-1] if e and isinstance(e[-1], FinishEvent) else None for e in seen]
            reason = why_not_kept(last)
            record = choices_record(seen)
        if reason is not None:
            metrics.ANSWER_KEPT.labels(reason).inc()
            return
        self.memory.offer(self.key, self.server.scope, record)
        work = asyncio.to_thread(self.memory.keep, self.key, self.server.scope, record)
        task = asyncio.get_running_loop().create_task(work)
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)
