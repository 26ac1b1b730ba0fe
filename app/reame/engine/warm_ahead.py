"""Warm-ahead prefill: what a finished conversation's next request will most likely start with,
computed while the engine has nothing else to do. Pure.

A chat's next turn is this prompt, this answer, the template's end of the assistant's turn and
the next user header, then the new question. When an answer ends, its sequence keeps its slot
(state "warming") with the answer's end and those closing tokens as work; a step runs them only
when no request is running or waiting, and the state kept for the next turn then holds them.
A request that arrives meanwhile goes first: it takes over a warming sequence its prompt starts
with (nothing copied), or a warming one gives its slot up, its state kept as computed so far.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass

from reame.engine.request import common_length
from reame.engine.sequence import Sequence


@dataclass(slots=True, frozen=True)
class TakeOver:
    warm: Sequence  # the warming sequence whose slot the request goes on in
    length: int  # tokens of its KV the request reuses


def warm_tail(
    computed: Seq[int], taken: Seq[int], closing: Seq[int], ends_turn: bool
) -> list[int] | None:
    """The tokens to compute after an answer: those it took but never computed (the last
    sampled one), without the end-of-turn token the model ended with, then `closing` (the
    template's end of turn and next user header). None when the next prompt would not start
    with them: no closing known, or the text was cut (a stop string) and so is not the tokens."""
    if not closing:
        return None
    left = list(taken[len(computed) :])
    if ends_turn:
        if not left:
            return None
        left = left[:-1]  # the end-of-turn token the model took: the closing has it, as written
    return left + list(closing)


def best_take_over(
    warming: Seq[Sequence], prompt: Seq[int], scope: str, at_least: int
) -> TakeOver | None:
    """The warming sequence of `scope` whose computed tokens start `prompt` longest, if that
    beats `at_least` (what the request would restore otherwise)."""
    best: TakeOver | None = None
    head = prompt[:-1]  # the last prompt token is computed anyway: its logits pick the answer
    for seq in warming:
        if seq.request.scope != scope:
            continue
        length = min(common_length(seq.tokens, head), seq.num_computed)
        if length > at_least and (best is None or length > best.length):
            best = TakeOver(seq, length)
    return best
