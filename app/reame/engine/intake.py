"""What comes into the engine: a request checked once and made a sequence, and the messages that
reach a running one (an abort, a hold). The sequence is made on the caller's thread, so that a
request that can never be served is refused there, before it takes a place."""

from __future__ import annotations

from dataclasses import dataclass

from reame.detokenize import TextStream
from reame.engine.request import GenerationRequest, Sink
from reame.engine.sequence import Sequence
from reame.engine.thought import Thought
from reame.errors import InvalidRequestError
from reame.sampling import Sampler
from reame.speculation.kit import Speculation


@dataclass(slots=True, frozen=True)
class Abort:
    request_id: str


@dataclass(slots=True, frozen=True)
class Hold:
    """Its reader stopped taking its tokens (held) or reads again."""

    request_id: str
    held: bool


def sequence_of(
    request: GenerationRequest,
    sink: Sink,
    vocab_size: int,
    context_length: int,
    spec: Speculation | None,
    takes_snapshots: bool,
) -> Sequence:
    """The engine's one check of a request (it must fit a sequence and the vocabulary), and
    the sequence it becomes: its sampler, drafters, snapshot points, grammar
    and thought."""
    prompt, params = request.prompt, request.params
    if not prompt:
        raise InvalidRequestError("the prompt is empty", param="prompt")
    n = len(prompt)
    if n >= context_length:
        raise InvalidRequestError(
            f"the prompt is {n} tokens but a sequence's context holds {context_length} tokens; "
            "shorten the prompt or raise context_length",
            param="prompt",
        )
    if any(not 0 <= t < vocab_size for t in prompt):
        raise InvalidRequestError("the prompt holds token ids outside the vocabulary", "prompt")
    try:
        sampler = Sampler(params, vocab_size)
    except ValueError as exc:
        raise InvalidRequestError(str(exc), param="logit_bias") from exc
    drafters = (
        spec.drafters(n, request.scope) if spec is not None and params.speculation != "off" else {}
    )
    due = sorted({p for p in (*request.snapshot_at, *request.cut_at) if 0 < p <= n})
    constraint = request.grammar.matcher() if request.grammar is not None else None
    # NOTE: a grammar applies to the answer, from the thought's end
    thought = Thought(request.thought, constraint) if request.thought is not None else None
    return Sequence(
        request,
        sink,
        sampler,
        TextStream(params.stop),
        tokens=list(prompt),
        snapshots_due=due if takes_snapshots else [],
        cut_only=frozenset(request.cut_at) - frozenset(request.snapshot_at),
        drafters=drafters,
        constraint=constraint if thought is None else None,
        thought=thought,
    )
