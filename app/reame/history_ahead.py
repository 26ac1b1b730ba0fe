"""The history a thinking template rewrote, computed ahead.

Qwen3's and Qwen3.5's templates drop an earlier turn's thought from the history they render,
so the next turn's prompt leaves the state kept after the thought: the whole answer would be
computed again (about 12 s of time to first token for a 300-token answer on a 7B on 2 cores).
Every turn of such a conversation cuts its chunks where its answer starts (and where the last
answer started), as a cold request of the next turn cuts them too, unless that is less than a
tiled chunk past the cut before (SnapshotPolicy.points: a new message is one chunk); once
an answer is whole, the answer as the history renders it, the end of the turn and the next user
header are computed in idle time from the state at the last cut before it (a resident sequence
cut back there, or a snapshot where the memory cannot be cut), and the state after them is kept
for the next turn (pinned for a session, in the prefix cache for anyone). The next turn computes
only its new message, and answers as a cold request does, token for token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reame import metrics
from reame.engine.request import Event, FinishEvent, GenerationRequest
from reame.errors import ReameError
from reame.saved_state import common_length
from reame.service import Job, Service
from reame.thinking.framing import with_thought_apart

# NOTE: probe texts that no conversation holds: where an answer and the next message go
_ANSWER, _NEXT = "reameHistoryAnswer", "reameHistoryNext"


def answer_starts(
    service: Service,
    messages: Sequence[Mapping[str, Any]],
    prompt: list[int],
    tools: list[dict] | None,
    kwargs: Mapping[str, Any] | None,
) -> tuple[int, ...]:
    """Where this turn's answer starts in its prompt as the next turn's history renders it
    (before a thought the template will drop), and where the previous answer started: the
    cuts (Job.cuts) of a conversation whose history is computed ahead."""
    probe = [
        *messages,
        {"role": "assistant", "content": _ANSWER},
        {"role": "user", "content": _NEXT},
    ]
    starts = [common_length(prompt, service.chat.tokens(probe, False, tools, kwargs))]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=0)
    if last > 0:
        before = service.chat.tokens(messages[:last], True, tools, kwargs)
        starts.append(common_length(before, prompt))
    return tuple(sorted(p for p in set(starts) if 0 < p < len(prompt)))


def history_ahead(
    service: Service,
    job: Job,
    messages: Sequence[Mapping[str, Any]],
    answer: str,
    tools: list[dict] | None,
    kwargs: Mapping[str, Any] | None,
) -> bool:
    """Submit, as idle-time work, the history of this turn's answer; False when there is
    nothing to compute. May read the disk: call it off the event loop."""
    if service.cache is None:
        return False
    # NOTE: as the client will send the answer back (a closing marker the model wrote in it
    # again is split off, as the next request's is)
    sent = with_thought_apart({"role": "assistant", "content": answer}, service.chat.thinking)
    turn = [*messages, sent, {"role": "user", "content": _NEXT}]
    text = service.chat.text(turn, tools, kwargs, add_generation_prompt=False)
    at = text.find(_NEXT)
    if at <= 0:
        return False
    history = service.chat.tokenize(text[:at])
    start = max((c for c in job.cuts if c <= len(history)), default=0)
    if start == 0 or common_length(history, job.prompt) < start or len(history) <= start:
        return False
    marks = tuple(m for m in job.marks if m < start) + (len(history),)
    reuse = service.reuse.plan(history, job.scope, job.session, marks, False, job.cuts)
    request = GenerationRequest(
        history,
        service.sampling(temperature=0.0, max_tokens=1),
        stored=reuse.stored,
        keep_state=True,
        cold_cuts=reuse.cold_cuts,
        scope=job.scope,
        owner=job.owner,
        session=job.session.name if job.session else "",
        background=True,
    )

    def sink(event: Event) -> None:  # NOTE: on the engine thread; its state goes by keep
        if isinstance(event, FinishEvent) and event.reason.is_whole:
            metrics.HISTORY_AHEAD_TOKENS.inc(event.num_prompt_tokens - event.num_cached_tokens)

    try:
        service.engine.submit(request, sink)
    except ReameError:  # NOTE: no place for idle-time work: the next turn computes it
        return False
    return True
