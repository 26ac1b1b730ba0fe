"""An answer as the answer memory keeps it (answer_memory.py) and gives it back: the engine's
events of each choice, or a Conclave's candidates and tally, written again on a hit by the same
code that writes a computed answer (whole, or streamed at once). Pure but for `replay`.

An answer is kept only if it is determined (every job greedy or seeded: a Conclave's candidates
too) and came whole from steps that computed it as a lone request (FinishEvent.is_exact).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import asdict, replace
from typing import Any

from reame.conclave.convene import Candidate, Verdict
from reame.conclave.vote import Tally
from reame.engine.request import Event, Finish, FinishEvent, TokenEvent
from reame.loop_inbox import ChoiceEvent
from reame.service import Job

MEMORY_HEADER = "X-Reame-Memory"  # "hit": the answer came from memory, nothing was decoded


def is_determined(jobs: Sequence[Job]) -> bool:
    """Every job's answer is fixed by what it asks: greedy, or sampled with a seed."""
    return all(j.params.is_greedy or j.params.seed is not None for j in jobs)


def why_not_kept(finishes: Sequence[FinishEvent | None]) -> str | None:
    """None if answers that ended so may be kept; else the reason (a metric's label)."""
    if any(f is None or not f.reason.is_whole for f in finishes):
        return "failed"
    if not all(f is not None and f.is_exact for f in finishes):
        return "inexact"
    return None


def choices_record(choices: Sequence[Sequence[Event]]) -> dict[str, Any]:
    return {"kind": "choices", "choices": [_events(events) for events in choices]}


def verdict_record(verdict: Verdict) -> dict[str, Any]:
    tally = verdict.tally
    return {
        "kind": "conclave",
        "candidates": [
            _events([*c.tokens, *([c.finish] if c.finish else [])]) for c in verdict.candidates
        ],
        "tally": {
            "size": tally.size,
            "votes": tally.votes,
            "abstained": tally.abstained,
            "stopped": tally.stopped,
        },
        "tokens_saved": verdict.tokens_saved,
    }


def recalled_choices(record: dict[str, Any], vocab_size: int) -> list[list[Event]] | None:
    """The events of each choice, as a hit gives them; None if the record is not such."""
    try:
        if record["kind"] != "choices":
            return None
        out = [_read_events(c, vocab_size) for c in record["choices"]]
    except (KeyError, TypeError, ValueError):
        return None
    return out if all(c and isinstance(c[-1], FinishEvent) for c in out) else None


def recalled_verdict(record: dict[str, Any], vocab_size: int) -> Verdict | None:
    """A Conclave's verdict as a hit gives it; None if the record is not such."""
    try:
        if record["kind"] != "conclave":
            return None
        candidates = []
        for entry in record["candidates"]:
            events = _read_events(entry, vocab_size)
            finish = events.pop() if events and isinstance(events[-1], FinishEvent) else None
            tokens = [e for e in events if isinstance(e, TokenEvent)]
            parts = [t.text for t in tokens] + ([finish.text] if finish else [])
            candidates.append(Candidate(tokens, parts, finish))
        t = record["tally"]
        votes = {str(a): [int(k) for k in v] for a, v in t["votes"].items()}
        tally = Tally(int(t["size"]), votes, [int(k) for k in t["abstained"]], list(t["stopped"]))
        verdict = Verdict(tally, candidates, int(record["tokens_saved"]))
        if verdict.winner.finish is None or len(candidates) != tally.size:
            return None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None
    return verdict


async def replay(choices: Sequence[Sequence[Event]]) -> AsyncGenerator[list[ChoiceEvent]]:
    """A remembered answer as the engine's stream of it: accepted (the empty batch), then every
    event of every choice in one hand-over."""
    yield []
    yield [ChoiceEvent(i, e) for i, events in enumerate(choices) for e in events]


def _events(events: Sequence[Event]) -> list[Any]:
    out: list[Any] = []
    for e in events:
        if isinstance(e, TokenEvent):
            top = [list(t) for t in e.top_logprobs]
            out.append([e.token, e.text, e.logprob, top, e.reasoning, e.in_thought])
        else:
            out.append(asdict(e))
    return out


def _read_events(raw: list[Any], vocab_size: int) -> list[Event]:
    events: list[Event] = []
    for item in raw:
        if isinstance(item, dict):
            finish = FinishEvent(**{**item, "reason": Finish(item["reason"])})
            # NOTE: nothing of the prompt was computed, and no draft
            events.append(
                replace(
                    finish,
                    num_cached_tokens=finish.num_prompt_tokens,
                    num_accepted_drafts=0,
                    num_rejected_drafts=0,
                )
            )
            continue
        token, text, logprob, top, reasoning, in_thought = item
        if not (isinstance(token, int) and 0 <= token < vocab_size):
            raise ValueError(f"token {token!r} is not of this vocabulary")
        pairs = tuple((int(t), float(p)) for t, p in top)
        events.append(
            TokenEvent(token, str(text), logprob, pairs, str(reasoning), bool(in_thought))
        )
    return events
