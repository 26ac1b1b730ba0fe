"""The engine's sequences (llama seq_ids, "slots"): which are free, and putting an admitted
sequence in one as its match says (engine/reuse_index.py): a free slot whose KV holds its
start, cut back there, or an empty one with a stored state restored. Engine thread only."""

from __future__ import annotations

from reame import metrics
from reame.cache.snapshot_policy import MIN_RESIDENT
from reame.engine.kv_context import KVContext
from reame.engine.reuse_index import Match, Resident, ReuseIndex
from reame.engine.sequence import Sequence


class Slots:
    def __init__(self, context: KVContext, keeps_prompts: bool, reuse: ReuseIndex) -> None:
        """`keeps_prompts`: a freed slot's KV is left for a request that starts alike."""
        self.context = context
        self.reuse = reuse
        self._keeps_prompts = keeps_prompts
        self._free = set(range(context.shape.num_sequences))

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_unlocked(self) -> int:
        """Free slots an empty one may be made of (not one a waiting match holds)."""
        return sum(not self.reuse.is_locked(s) for s in self._free)

    def place(self, seq: Sequence, match: Match | None) -> None:
        """Give an admitted sequence a free slot: the resident one its match named, else an
        empty one, with the match's stored state restored into it."""
        if match is not None and match.tier == "resident":
            self._free.remove(match.slot)
            self.reuse.take(match.slot)
            self.go_on(seq, match.slot, match)
            return
        seq.placed(self.take_empty())
        if match is None or match.state is None:
            return
        with metrics.PREFIX_RESTORE_SECONDS.time():
            loaded = self.context.load_state(seq.slot, match.state.data)
        if loaded:
            self.go_on(seq, seq.slot, match)

    def go_on(self, seq: Sequence, slot: int, match: Match) -> None:
        """`seq` goes on in `slot`, whose KV holds the match's tokens and maybe more: cut back
        to the match's length (at least the last prompt token is computed again: its logits
        pick the first new token)."""
        seq.placed(slot)
        if not self.context.remove(slot, match.length):
            self.context.clear(slot)  # NOTE: it cannot be cut there: a cold start
            return
        seq.starts_at(match.length, match.held)

    def take_empty(self) -> int:
        """A free slot emptied: one holding nothing, else the least recently used of those
        holding a finished prompt that no waiting match holds."""
        slot = self.reuse.evict(self._free)
        if slot is None:
            raise RuntimeError("every free slot is held for a waiting request")
        self._free.remove(slot)
        if self.reuse.take(slot) is not None:
            self.context.clear(slot)
        return slot

    def release(self, seq: Sequence, keep_prompt: bool) -> None:
        """Free a sequence's slot; with `keep_prompt` (and a prefix cache) its prompt's KV stays
        there for a request that starts alike."""
        keep = max(seq.chunk_ends, default=0) if keep_prompt else 0
        if self._keeps_prompts and keep >= MIN_RESIDENT and self.context.remove(seq.slot, keep):
            self.reuse.insert(seq.slot, Resident.of(seq, keep))
        else:
            self.context.clear(seq.slot)
        self._free.add(seq.slot)
        seq.placed(-1)
