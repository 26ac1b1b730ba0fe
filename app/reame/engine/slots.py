"""The engine's sequences (llama seq_ids, "slots"): which are free, and the resident tier of
prefix reuse (cache/prefix_reuse.py): free ones that still hold a finished prompt's KV, which
a request starting alike goes on from without a copy. Engine thread only."""

from __future__ import annotations

from reame import metrics
from reame.cache.snapshot_policy import MIN_RESIDENT
from reame.engine.kv_context import KVContext
from reame.engine.request import SavedState, common_length
from reame.engine.sequence import Sequence


class Slots:
    def __init__(self, context: KVContext, keeps_prompts: bool) -> None:
        self.context = context
        self._keeps_prompts = keeps_prompts
        self._free = set(range(context.shape.num_sequences))
        # free slots whose KV still holds a finished prompt: (its tokens, its chunk ends, the
        # scope of the request that computed it)
        self._resident: dict[int, tuple[list[int], list[int], str]] = {}

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
            self._restore(seq, seq.request.prefix)

    def _reuse_resident(self, seq: Sequence) -> bool:
        """Take the free slot whose KV still holds the longest reusable prefix of this prompt,
        if that beats restoring the request's prefix: nothing is copied (llama-server's slot
        reuse, up to a chunk end so the rest is computed as a cold request computes it)."""
        prompt = seq.request.prompt[:-1]
        best_slot, best = -1, 0
        for slot, (tokens, ends, scope) in self._resident.items():
            if scope != seq.request.scope:
                continue
            common = common_length(tokens, prompt)
            reuse = max((e for e in ends if e <= common), default=0)
            if reuse > best:
                best_slot, best = slot, reuse
        prefix = seq.request.prefix
        if best < MIN_RESIDENT or (prefix is not None and prefix.common_length(prompt) > best):
            return False
        self._free.remove(best_slot)
        del self._resident[best_slot]
        seq.slot = best_slot
        if not self.context.remove(best_slot, best):
            self.context.clear(best_slot)  # NOTE: it cannot be cut there: a cold start
            best = 0
        _starts_at(seq, best)
        return True

    def take_empty(self) -> int:
        """The lowest free slot holding nothing, else the lowest free slot, emptied."""
        slot = min(self._free - self._resident.keys(), default=min(self._free))
        self._free.remove(slot)
        if self._resident.pop(slot, None) is not None:
            self.context.clear(slot)
        return slot

    def _restore(self, seq: Sequence, prefix: SavedState) -> None:
        """Load a saved state and keep its common prefix with the prompt; at least the last
        prompt token is computed again, since its logits pick the first new token."""
        common = prefix.common_length(seq.request.prompt[:-1])
        if common == 0:
            return
        with metrics.PREFIX_RESTORE_SECONDS.time():
            loaded = self.context.load_state(seq.slot, prefix.data)
        if not loaded:
            return
        if not self.context.remove(seq.slot, common):
            self.context.clear(seq.slot)  # NOTE: a state that cannot be cut is computed anew
            return
        _starts_at(seq, common)

    def release(self, seq: Sequence, keep_prompt: bool) -> None:
        """Free a sequence's slot; with `keep_prompt` (and a prefix cache) its prompt's KV stays
        there for a request that starts alike."""
        keep = max(seq.chunk_ends, default=0) if keep_prompt else 0
        if self._keeps_prompts and keep >= MIN_RESIDENT and self.context.remove(seq.slot, keep):
            self._resident[seq.slot] = (seq.tokens[:keep], seq.chunk_ends, seq.request.scope)
        else:
            self.context.clear(seq.slot)
        self._free.add(seq.slot)
        seq.slot = -1


def _starts_at(seq: Sequence, num_cached: int) -> None:
    seq.num_computed = seq.num_cached = num_cached
    seq.chunk_ends = [num_cached]
    seq.snapshots_due = [p for p in seq.snapshots_due if p > num_cached]
