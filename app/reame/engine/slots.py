"""The engine's sequences (llama seq_ids, "slots"): which are free, and putting an admitted
sequence in one as its match says (engine/reuse_index.py): a free slot whose KV holds its
start, cut back there, or an empty one with a stored state restored. What that does to the KV
is queued as moves (engine/kv_moves.py), which the runner does before the next batch. Engine
thread only."""

from __future__ import annotations

from reame.cache.snapshot_policy import MIN_RESIDENT
from reame.engine.kv_moves import Cut, Empty, KVMoves, Restore
from reame.engine.reuse_index import Match, Resident, ReuseIndex
from reame.engine.sequence import Sequence


class Slots:
    def __init__(self, moves: KVMoves, keeps_prompts: bool, reuse: ReuseIndex) -> None:
        """`keeps_prompts`: a freed slot's KV is left for a request that starts alike."""
        self.moves = moves
        self.reuse = reuse
        self._keeps_prompts = keeps_prompts
        self._free = set(range(moves.context.shape.num_sequences))

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def has_empty(self) -> bool:
        """A free slot holds nothing (a stored state restored there cuts no one's KV)."""
        return any(not self.reuse.holds(s) for s in self._free)

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
        self.moves.add(Restore(seq.slot, match.state.data))
        self.go_on(seq, seq.slot, match)

    def go_on(self, seq: Sequence, slot: int, match: Match) -> None:
        """`seq` goes on in `slot`, whose KV holds the match's tokens and maybe more: cut back
        to the match's length (at least the last prompt token is computed again: its logits
        pick the first new token). On memory that cannot be cut the match is all of a state
        (reuse_index), and the cut drops nothing."""
        seq.placed(slot)
        self.moves.add(Cut(slot, match.length))
        seq.starts_at(match.length, match.held, match.prompt_logits, self.moves.can_cut)

    def take_empty(self) -> int:
        """A free slot emptied: one holding nothing, else the least recently used of those
        holding a finished prompt that no waiting match holds."""
        slot = self.reuse.evict(self._free)
        if slot is None:
            raise RuntimeError("every free slot is held for a waiting request")
        self._free.remove(slot)
        if self.reuse.take(slot) is not None:
            self.moves.add(Empty(slot))
        return slot

    def release(self, seq: Sequence, keep_prompt: bool) -> None:
        """Free a sequence's slot; with `keep_prompt` (and a prefix cache) its prompt's KV stays
        there for a request that starts alike (where its memory can be cut there)."""
        keep = max(seq.chunk_ends, default=0) if keep_prompt else 0
        cuts = self.moves.can_cut or keep == seq.num_computed
        if self._keeps_prompts and keep >= MIN_RESIDENT and cuts:
            self.moves.add(Cut(seq.slot, keep))
            self.reuse.insert(seq.slot, Resident.of(seq, keep))
        else:
            self.moves.add(Empty(seq.slot))
        self._free.add(seq.slot)
        seq.placed(-1)

    def lost(self, slot: int) -> None:
        """A move failed there and emptied it: it holds nothing for anyone."""
        self.reuse.take(slot)
