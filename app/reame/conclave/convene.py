"""Running a Conclave: N candidates of one prompt through the engine as one group (one
prefill), each finished answer counted as it comes, the rest stopped once a majority holds."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace

from reame import metrics
from reame.conclave.answers import extract
from reame.conclave.vote import Tally
from reame.engine.request import FinishEvent, GenerationRequest, TokenEvent
from reame.loop_inbox import ChoiceEvent
from reame.service import Job, Service


@dataclass(slots=True)
class Candidate:
    tokens: list[TokenEvent] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)
    finish: FinishEvent | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(slots=True)
class Verdict:
    tally: Tally
    candidates: list[Candidate]
    tokens_saved: int = 0  # an estimate of what the stopped ones would have gone on to write

    @property
    def winner(self) -> Candidate:
        return self.candidates[self.tally.winner()[1]]

    @property
    def failed(self) -> FinishEvent | None:
        """The first candidate that did not end whole (an error, aborted by the server, refused
        after waiting too long)."""
        for c in self.candidates:
            if c.finish is not None and not c.finish.reason.is_whole:
                return c.finish
        return None

    @property
    def num_completion_tokens(self) -> int:
        """Every candidate's tokens, the stopped ones' too: all were computed."""
        return sum(
            c.finish.num_completion_tokens if c.finish else len(c.tokens) for c in self.candidates
        )

    @property
    def num_cached_tokens(self) -> int:
        """The prompt tokens the first candidate, which computed the prompt, did not compute."""
        lead = self.candidates[0].finish
        return lead.num_cached_tokens if lead is not None else 0

    def summary(self) -> dict[str, object]:
        return {**self.tally.summary(), "tokens_saved": self.tokens_saved}


def candidate_jobs(job: Job, n: int, explore: float = 0.0) -> list[Job]:
    """N candidates of a job. Candidate 0 is the job itself (greedy stays greedy); candidate k
    samples at `explore` or the job's own temperature, the warmer, with seed + k (a random seed
    each when unseeded). Without that floor a greedy Conclave is N copies of one answer."""
    seed = job.params.seed
    warmer = max(job.params.temperature, explore)
    return [job] + [
        replace(
            job,
            params=job.params.model_copy(
                update={"seed": seed + k if seed is not None else None, "temperature": warmer}
            ),
            session=None,
        )
        for k in range(1, n)
    ]


def open_conclave(
    service: Service,
    job: Job,
    n: int,
    prepared: tuple[list[Job], list[GenerationRequest]] | None = None,
    explore: float = 0.0,
) -> AsyncGenerator[list[ChoiceEvent]]:
    """The candidates' event stream, for a caller that wants it accepted (its first, empty
    batch read) before it answers: then pass it to `convene`. `prepared`: the candidate jobs
    and their engine requests, made already off the loop (candidate_jobs, then Service.prepare
    of them as one group)."""
    if prepared is not None:
        return service.astream_many(prepared[0], shared_prompt=True, requests=prepared[1])
    return service.astream_many(candidate_jobs(job, n, explore), shared_prompt=True)


async def convene(
    service: Service,
    job: Job,
    n: int,
    rule: str | re.Pattern[str] = "auto",
    early_stop: bool = True,
    stream: AsyncGenerator[list[ChoiceEvent]] | None = None,
    explore: float = 0.0,
) -> Verdict:
    """Run N candidates of `job` and count their answers by `rule`."""
    tally = Tally(n)
    candidates = [Candidate() for _ in range(n)]
    if stream is None:
        stream = open_conclave(service, job, n, explore=explore)
    try:
        async for batch in stream:
            for item in batch:
                candidate, event = candidates[item.index], item.event
                candidate.parts.append(event.text)
                if isinstance(event, TokenEvent):
                    candidate.tokens.append(event)
                    continue
                candidate.finish = event
                if not event.reason.is_whole:
                    return Verdict(tally, candidates)  # NOTE: leaving aborts the others
                tally.add(item.index, extract(candidate.text, rule))
            if early_stop and tally.num_in < n and tally.majority() is not None:
                break
    finally:
        await stream.aclose()  # NOTE: stops the candidates still running
    verdict = Verdict(tally, candidates)
    tally.stopped = [k for k, c in enumerate(candidates) if c.finish is None]
    # NOTE: candidates step together, so a stopped one has written about as much as the longest
    # finished one; what it would have added is estimated as much again (a long tail: measured
    # on the quiz, stopped candidates went on to 2.1 times the length they were stopped at)
    limit = job.params.max_tokens
    verdict.tokens_saved = sum(
        min(len(candidates[k].tokens), limit - len(candidates[k].tokens)) for k in tally.stopped
    )
    metrics.CONCLAVES.inc()
    metrics.CONCLAVE_STOPPED.inc(len(tally.stopped))
    metrics.CONCLAVE_TOKENS_SAVED.inc(verdict.tokens_saved)
    return verdict
