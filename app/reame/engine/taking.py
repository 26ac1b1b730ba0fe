"""Taking a token into a sequence: it grows by the token, its grammar and its thought move on,
its text goes out as an event, and the finish reason says whether it ended there. A sampled
token, a run its grammar forces and a thought's closing run are all taken alike. For the Update
(engine/update.py), which ends the requests; engine thread only."""

from __future__ import annotations

import functools

import numpy as np

from reame.engine.outbox import Outbox
from reame.engine.request import Finish, TokenEvent
from reame.engine.sequence import Sequence
from reame.errors import GrammarFailedError
from reame.grammar.decoding import take_forced
from reame.llama.model import Model
from reame.sampling import Sampled


class Taker:
    """Takes tokens into sequences and emits them into the `out` each call is given (the
    Update's outbox, which the engine may swap between steps). It ends nothing: each call
    returns the finish reason, None while the sequence goes on."""

    def __init__(self, model: Model, context_length: int, forced_runs: bool) -> None:
        """`forced_runs`: the tokens a grammar forces are taken together (else one a step, as a
        sampled token would)."""
        self.model, self.context_length = model, context_length
        self._forced_runs = forced_runs

    @functools.cached_property
    def _no_end(self) -> np.ndarray:
        """Every token but the ends of generation: after a thought, an answer has words."""
        allowed = np.ones(self.model.vocab_size, dtype=bool)
        allowed[self.model.end_of_generation_ids()] = False
        return allowed

    def advance(self, seq: Sequence, logits: np.ndarray, out: Outbox) -> Finish | None:
        """Take the token `logits` pick under the sequence's grammar (or what the grammar forces
        instead), then what the grammar forces after it."""
        constraint = seq.constraint
        if constraint is None:
            allowed = (
                self._no_end if seq.thought is not None and seq.thought.awaits_answer else None
            )
            reason = self.take(seq, seq.sampler.sample(logits, seq.tokens, allowed), out)
            if reason is None and seq.constraint is not None and self._forced_runs:
                reason = self.run(seq, take_forced(seq, whole_run=True), out)  # a thought ended
        elif forced := take_forced(seq, whole_run=self._forced_runs):
            reason = self.run(seq, forced, out)  # NOTE: known: these logits are not needed
        else:
            allowed = constraint.allowed()
            if not allowed.any():
                raise GrammarFailedError(
                    f"the grammar allows no token here: {_first_line(constraint.error)}"
                )
            reason = self.take(seq, seq.sampler.sample(logits, seq.tokens, allowed), out)
            if reason is None and self._forced_runs:
                reason = self.run(seq, take_forced(seq, whole_run=True), out)
        return reason

    def run(self, seq: Sequence, run: list[Sampled], out: Outbox) -> Finish | None:
        """Take forced tokens until one ends the sequence; the finish reason if one does."""
        for sampled in run:
            reason = self.take(seq, sampled, out)
            seq.took_forced()
            if reason is not None:
                return reason
        return None

    def take(self, seq: Sequence, sampled: Sampled, out: Outbox) -> Finish | None:
        """Append a token and emit it; the finish reason if the sequence ends with it."""
        token = sampled.token
        params = seq.request.params
        thought = seq.thought
        is_end = not params.ignore_eos and self.model.is_end_of_generation(token)
        if is_end and thought is not None and thought.is_thinking:
            # NOTE: an answer never ends inside its thought: the close takes the end's place
            return self._close_thought(seq, out)
        seq.take(token)
        if is_end:
            return Finish.STOP
        constraint = seq.constraint
        if constraint is not None and not constraint.consume([token]):
            why = _first_line(constraint.error)
            raise GrammarFailedError(f"the grammar failed after {seq.num_generated} tokens: {why}")
        piece = self.model.piece(token)
        reasoning, in_thought = "", False
        if thought is not None and not thought.is_settled:
            split, in_thought = thought.push(token, piece)
            reasoning = split.reasoning
            delta = seq.text.push_text(split.content)
            if not thought.is_closing and not thought.is_thinking and thought.deferred:
                seq.answer_grammar()
        else:
            delta = seq.text.push(piece)
        out.emit(
            seq,
            TokenEvent(
                token, delta.text, sampled.logprob, sampled.top_logprobs, reasoning, in_thought
            ),
        )
        if delta.is_stopped or (constraint is not None and constraint.is_finished):
            return Finish.STOP
        if seq.num_generated >= params.max_tokens or len(seq.tokens) >= self.context_length:
            return Finish.LENGTH
        if thought is not None and thought.is_spent:
            return self._close_thought(seq, out)
        return None

    def _close_thought(self, seq: Sequence, out: Outbox) -> Finish | None:
        """Write the template's closing run after the thought (a budget spent, or an end the
        model wrote inside it), then what the answer's grammar forces, as known tokens."""
        thought = seq.thought
        assert thought is not None
        thought.is_closing = True
        logprob = 0.0 if seq.request.params.logprobs else None
        try:
            run = [Sampled(t, logprob) for t in thought.spec.close_tokens]
            reason = self.run(seq, run, out)
        finally:
            thought.is_closing = False
        if thought.deferred is not None:  # NOTE: after the whole run: its spaces are no JSON
            seq.answer_grammar()
        if reason is None and seq.constraint is not None and self._forced_runs:
            reason = self.run(seq, take_forced(seq, whole_run=True), out)
        return reason


def _first_line(error: str) -> str:
    """llguidance's error without the parser state it dumps after its first line."""
    return error.partition("\n")[0]
