"""Putting draft tokens after the next token of each decoding sequence, before a step.

Every drafter that proposes for free (a lookup, Il Suggeritore) is asked, and the proposal that
promises most tokens a second wins, by the controller's figures for its drafter: a short
suggestion that is nearly always right can beat a long lookup that is mostly wrong. Il
Suggeritore's form may be followed by what the context lookup finds after it (the words that
filled the same form before), as one run whose shares are booked to each. A drafter that runs
a model is asked only where nothing ranked above it proposed, as its proposal costs a forward
pass a token. Each decision is on the sequence's own figures (`Sequence.draft_stats`) where its
runs have given some.
"""

from __future__ import annotations

import time
from collections.abc import Sequence as Seq
from dataclasses import dataclass

from reame.engine.sequence import Sequence
from reame.grammar.decoding import cut_to_grammar
from reame.speculation.context_lookup import ContextLookup
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation
from reame.speculation.suggeritore import Suggeritore


@dataclass(slots=True, frozen=True)
class Proposal:
    parts: tuple[tuple[str, int], ...]  # (drafter, number of its tokens), in order
    tokens: list[int]

    @property
    def source(self) -> str:
        """The drafters' names, joined by + (for logs and tests)."""
        return "+".join(name for name, _ in self.parts)


def add_drafts(spec: Speculation, running: Seq[Sequence], context_length: int) -> None:
    """Drafts for the decoding sequences that can verify them, as the controller says, in each
    one's `drafts` (after its tokens, apart from them), to be computed and verified in the step."""
    controller = spec.controller
    decoding = [s for s in running if s.is_decoding]
    for seq in decoding:
        seq.propose([])
        # NOTE: right after a thought, the answer's first words are sampled with its end
        # masked out (update.py): a verify run would let a drafted end through
        if not seq.drafters or (seq.thought is not None and seq.thought.awaits_answer):
            continue
        proposal = best_proposal(controller, seq, len(decoding) - 1, context_length)
        if proposal is not None:
            seq.propose(proposal.tokens, proposal.parts)
    spec.publish()


def best_proposal(
    controller: SpecController, seq: Sequence, batch_tokens: int, context_length: int
) -> Proposal | None:
    """The proposal of `seq`'s drafters that gives most tokens a second beside `batch_tokens`
    other tokens; a probe of a drafter the controller turned off goes first, so that it can
    come back."""
    params = seq.request.params
    room = min(context_length - len(seq.tokens) - 1, params.max_tokens - seq.num_generated - 1)
    if controller.exact_until is not None:  # the run's last position stays before it
        room = min(room, controller.exact_until - len(seq.tokens))
    found: list[Proposal] = []
    lengths: dict[str, int] = {}
    own = seq.draft_stats
    for name in controller.order(list(seq.drafters), own):
        drafter = seq.drafters[name]
        if drafter.runs_a_model and found:
            continue
        k = lengths[name] = min(
            controller.draft_length(name, batch_tokens, params.speculation, own), room
        )
        if k <= 0:
            continue
        is_probe = controller.is_probing(name)
        started = time.perf_counter()
        tokens = cut_to_grammar(seq, drafter.propose(seq.tokens, k)[:k])
        controller.record_proposal(name, time.perf_counter() - started, k)
        if not tokens:
            continue
        proposal = Proposal(((name, len(tokens)),), tokens)
        if drafter.runs_a_model or is_probe:
            return proposal
        found.append(proposal)
    if not found:
        return None
    found += _continued(seq, found, lengths.get(ContextLookup.name, 0))
    return max(found, key=lambda p: controller.rate(p.parts, batch_tokens, own))


def _continued(seq: Sequence, found: list[Proposal], length: int) -> list[Proposal]:
    """Il Suggeritore's proposal followed by the context lookup's continuation of it, within
    the run length the controller gives the lookup."""
    lookup = seq.drafters.get(ContextLookup.name)
    if not isinstance(lookup, ContextLookup):
        return []
    out = []
    for p in found:
        if p.parts[0][0] == Suggeritore.name and length > len(p.tokens):
            more = lookup.continue_after(seq.tokens, p.tokens, length - len(p.tokens))
            more = cut_to_grammar(seq, p.tokens + more)[len(p.tokens) :]
            if more:
                parts = (*p.parts, (ContextLookup.name, len(more)))
                out.append(Proposal(parts, p.tokens + more))
    return out
