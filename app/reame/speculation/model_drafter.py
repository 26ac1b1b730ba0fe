"""Drafts from a small model with the target's vocabulary, on its own llama context.

The engine thread is its only user. Each running sequence's drafter owns one KV slot of the
draft context while it lives; what a slot holds is kept as token ids and checked against the
sequence's history before every proposal, so a slot taken over or left behind is recomputed
from where the two part, never trusted.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from reame.errors import ConfigError
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model
from reame.saved_state import common_length

BATCH = 256  # catching a slot up on a new prompt: tokens per llama_decode


class DraftModel:
    def __init__(
        self, model: Model, target: Model, context_length: int, slots: int, threads: int
    ) -> None:
        mine, theirs = model.tokenizer_fingerprint(), target.tokenizer_fingerprint()
        if mine != theirs or model.vocab_size != target.vocab_size:
            raise ConfigError(
                f"draft model {model.path.name} has another vocabulary than {target.path.name} "
                f"({model.vocab_size} tokens, tokenizer {mine[:12]}; the model has "
                f"{target.vocab_size} tokens, tokenizer {theirs[:12]}): a draft model must "
                "share the model's tokenizer"
            )
        self.model = model
        self.context = Context(model, ContextShape(context_length * slots, BATCH, slots, threads))
        self._tokens: list[list[int]] = [[] for _ in range(slots)]
        self._owners: list[weakref.ref[ModelDrafter] | None] = [None] * slots
        self._last_used = [0] * slots
        self._clock = 0
        self._last_index = 0  # the batch row of the last logits decoded

    def propose(self, drafter: ModelDrafter, history: Sequence[int], k: int) -> list[int]:
        """The draft model's greedy continuation of `history`, k tokens."""
        slot = self._slot_for(drafter, history)
        held = self._tokens[slot]
        # NOTE: the last history token is always decoded again: its logits give the first draft
        keep = common_length(held, history[:-1])
        if not self.context.remove(slot, keep):
            self.context.clear(slot)  # NOTE: cannot be cut there: draft from the start
            keep = 0
        del held[keep:]
        for start in range(keep, len(history), BATCH):
            chunk = list(history[start : start + BATCH])
            self._decode(slot, chunk, is_last=start + BATCH >= len(history))
        out: list[int] = []
        while True:
            out.append(int(np.argmax(self.context.logits(self._last_index))))
            if len(out) == k:
                return out
            self._decode(slot, out[-1:], is_last=True)

    def _decode(self, slot: int, tokens: list[int], is_last: bool) -> None:
        held = self._tokens[slot]
        wants = [False] * len(tokens)
        wants[-1] = is_last
        self.context.decode(
            tokens, range(len(held), len(held) + len(tokens)), [slot] * len(tokens), wants
        )
        held.extend(tokens)
        self._last_index = len(tokens) - 1

    def _slot_for(self, drafter: ModelDrafter, history: Sequence[int]) -> int:
        self._clock += 1
        slot = drafter.slot
        if slot < 0 or self._owner(slot) is not drafter:
            unowned = [s for s in range(len(self._tokens)) if self._owner(s) is None]
            # a slot nobody drafts in, holding most of this history; else the least recently used
            slot = max(
                unowned or range(len(self._tokens)),
                key=lambda s: (common_length(self._tokens[s], history), -self._last_used[s]),
            )
            self._owners[slot] = weakref.ref(drafter)
            drafter.slot = slot
        self._last_used[slot] = self._clock
        return slot

    def _owner(self, slot: int) -> ModelDrafter | None:
        ref = self._owners[slot]
        return ref() if ref is not None else None

    def close(self) -> None:
        self.context.close()
        self.model.close()


class ModelDrafter:
    """One sequence's drafter over the shared draft model."""

    name = "draft-model"
    runs_a_model = True

    def __init__(self, draft: DraftModel) -> None:
        self.draft, self.slot = draft, -1

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        return self.draft.propose(self, history, k) if k > 0 else []

    def observe(self, proposed: int, accepted: int) -> None:
        return None
