"""The engine's sequences (llama seq_ids, "slots"): which are free, and the resident tier of
prefix reuse (cache/prefix_reuse.py): free ones that still hold a finished prompt's KV, which
a request starting alike goes on from without a copy. Engine thread only."""

from __future__ import annotations

from dataclasses import dataclass

from reame import metrics
from reame.cache.snapshot_policy import MIN_RESIDENT
from reame.engine.exact_reuse import Computed, cuts_past, reuse_length
from reame.engine.kv_context import KVContext
from reame.engine.sequence import Sequence
from reame.saved_state import SavedState, common_length


@dataclass(slots=True, frozen=True)
class Resident:
    """What a finished sequence left in its slot's KV (none of the request's sink or sampler:
    nothing of a client is kept alive by it)."""

    tokens: list[int]  # the tokens its KV holds
    chunk_ends: list[int]
    chunks: list[tuple[int, int]]
    scope: str
    num_prompt: int
    session: str  # GenerationRequest.session: "" for none

    @classmethod
    def of(cls, seq: Sequence, length: int) -> Resident:
        request = seq.request
        return cls(
            seq.tokens[:length],
            seq.chunk_ends,
            seq.chunks,
            request.scope,
            seq.num_prompt,
            request.session,
        )

    @property
    def prompt_length(self) -> int:
        return self.num_prompt

    @property
    def known_ends(self) -> list[int]:
        return self.chunk_ends


class Slots:
    def __init__(self, context: KVContext, keeps_prompts: bool, budget: int = 512) -> None:
        """`budget`: a step's tokens at most (where a cold request's chunks end)."""
        self.context = context
        self._keeps_prompts = keeps_prompts
        self._budget = budget
        self._free = set(range(context.shape.num_sequences))
        # free slots whose KV still holds a finished prompt (and, after warm-ahead, its answer)
        self._resident: dict[int, Resident] = {}

    @property
    def num_free(self) -> int:
        return len(self._free)

    def place(self, seq: Sequence) -> None:
        """Give an admitted sequence a slot: one whose KV holds a long enough start of its
        prompt, else an empty one with the request's saved prefix restored, if it has one."""
        if self._reuse_resident(seq):
            return
        seq.slot = self.take_empty()
        if seq.request.prefix is not None:
            self._restore(seq, seq.request.prefix, self.restorable(seq))

    def restorable(self, seq: Sequence) -> int:
        """How much of the request's saved prefix it goes on from, if restored."""
        prefix = seq.request.prefix
        if prefix is None:
            return 0
        return self.reusable(seq, prefix, prefix.common_length(seq.request.prompt[:-1]))

    def _reuse_resident(self, seq: Sequence) -> bool:
        """Take the free slot whose KV still holds the longest reusable prefix of this prompt,
        if that beats restoring the request's prefix: nothing is copied (llama-server's slot
        reuse, where it stays exact, or as a session's state: see reusable)."""
        prompt = seq.request.prompt[:-1]
        best_slot, best = -1, 0
        for slot, held in self._resident.items():
            if held.scope != seq.request.scope:
                continue
            reuse = self.reusable(seq, held, common_length(held.tokens, prompt))
            if not self.context.can_cut and reuse != len(held.tokens):
                continue  # NOTE: memory that cannot be cut goes on from all of it or none
            if reuse > best:
                best_slot, best = slot, reuse
        if best < MIN_RESIDENT or self.restorable(seq) > best:
            return False
        self._free.remove(best_slot)
        held = self._resident.pop(best_slot)
        seq.slot = best_slot
        if not self.context.remove(best_slot, best):
            self.context.clear(best_slot)  # NOTE: it cannot be cut there: a cold start
            best = 0
        starts_at(seq, best, held)
        seq.snapshots_due = cuts_past(seq.snapshots_due, best, seq.num_prompt)
        return True

    def reusable(self, seq: Sequence, held: Computed, common: int) -> int:
        """How much of a computed state (a finished sequence's KV left in its slot, or a saved
        state) which shares `common` tokens with `seq`'s prompt, to go on from: the one rule
        of engine/exact_reuse.py."""
        request = seq.request
        return reuse_length(
            common,
            held,
            request.session,
            request.cold_cuts,
            seq.snapshots_due,
            seq.num_prompt,
            self._budget,
        )

    def take_empty(self) -> int:
        """The lowest free slot holding nothing, else the lowest free slot, emptied."""
        slot = min(self._free - self._resident.keys(), default=min(self._free))
        self._free.remove(slot)
        if self._resident.pop(slot, None) is not None:
            self.context.clear(slot)
        return slot

    def _restore(self, seq: Sequence, prefix: SavedState, common: int) -> None:
        """Load a saved state and keep its first `common` tokens (at least the last prompt
        token is computed again, since its logits pick the first new token)."""
        if common == 0:
            return
        with metrics.PREFIX_RESTORE_SECONDS.time():
            loaded = self.context.load_state(seq.slot, prefix.data)
        if not loaded:
            return
        if not self.context.remove(seq.slot, common):
            self.context.clear(seq.slot)  # NOTE: a state that cannot be cut is computed anew
            return
        starts_at(seq, common, prefix)
        seq.snapshots_due = cuts_past(seq.snapshots_due, common, seq.num_prompt)

    def release(self, seq: Sequence, keep_prompt: bool) -> None:
        """Free a sequence's slot; with `keep_prompt` (and a prefix cache) its prompt's KV stays
        there for a request that starts alike."""
        keep = max(seq.chunk_ends, default=0) if keep_prompt else 0
        if self._keeps_prompts and keep >= MIN_RESIDENT and self.context.remove(seq.slot, keep):
            self._resident[seq.slot] = Resident.of(seq, keep)
        else:
            self.context.clear(seq.slot)
        self._free.add(seq.slot)
        seq.slot = -1


def starts_at(seq: Sequence, num_cached: int, held: Computed | None = None) -> None:
    """The sequence goes on from `num_cached` tokens already in its slot (left there or saved
    by `held`, whose chunks up to there it inherits, as far as they are known)."""
    seq.num_computed = seq.num_cached = num_cached
    seq.chunk_ends = [e for e in held.chunk_ends if e < num_cached] if held else []
    seq.chunk_ends.append(num_cached)
    seq.chunks = [c for c in held.chunks if c[0] < num_cached] if held else []
    seq.snapshots_due = [p for p in seq.snapshots_due if p > num_cached]
