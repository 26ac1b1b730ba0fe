"""Putting draft tokens after the next token of each decoding sequence, before a step."""

from __future__ import annotations

import time
from collections.abc import Sequence as Seq

from reame.engine.sequence import Sequence
from reame.spec.speculation import Speculation


def add_drafts(spec: Speculation, running: Seq[Sequence], context_length: int) -> None:
    """Drafts for the decoding sequences that can verify them, as the controller says; they go
    at the end of each sequence's tokens (and in `drafts`), to be verified in the step."""
    controller = spec.controller
    decoding = [s for s in running if len(s.tokens) - s.num_computed == 1]
    for seq in decoding:
        seq.drafts = []
        if not seq.drafters:
            continue
        params = seq.request.params
        room = min(context_length - len(seq.tokens) - 1, params.max_tokens - seq.num_generated - 1)
        for name in controller.order(list(seq.drafters)):
            wanted = controller.draft_length(name, len(decoding) - 1, params.speculation)
            k = min(wanted, room)
            if k <= 0:
                continue
            started = time.perf_counter()
            proposal = seq.drafters[name].propose(seq.tokens, k)[:k]
            controller.record_proposal(name, time.perf_counter() - started, k)
            if proposal:
                seq.drafts, seq.draft_source = proposal, name
                seq.tokens.extend(proposal)
                break
    spec.publish()
