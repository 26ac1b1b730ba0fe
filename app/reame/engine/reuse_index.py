"""Where a request goes on from: the one place reuse is decided. Engine thread only.

A computed state can be in six places, and one `match` looks at all of them:
- resident: a free sequence (slot) whose KV still holds what a finished request computed
  (`insert`ed as it left); taken with nothing copied;
- warming: an answered sequence still in its slot, computing its next turn's start in idle time
  (engine/warm_ahead.py); taken over likewise, by a request that goes on from all it computed
  (its state is not read yet);
- pinned, ram, disk, shared: stored states a worker thread prefetched for the request before it
  was queued (cache/prefix_reuse.py `prefetch`: its session's state, the longest whole stored
  prefix, a stored state that shares more and then parts), already in memory; restored into an
  empty slot and cut back. The last answers' final states the engine read itself count too
  (`kept_final`): pinned for a session's, ram for anyone's; a request prefetched while one was
  being read missed it in the stores.

A resident slot that holds a request's whole prompt as its own (maybe its answer after it), with
the logits its last token gave (computed exactly: as a cold request computes them), serves all of
it: the first token is picked from those logits and nothing is computed (the same prompt again,
sampled otherwise).
Elsewhere the prompt's last token is always computed again.

How much of any of them a request may go on from is decided here alone (`_usable`): the
exactness rule of engine/exact_reuse.py, and on memory that cannot be cut (recurrent layers)
all of a state or none. The longest wins; on a tie, the first in TIERS (nothing copied before
a copy), but where a free slot is empty, a stored state before a resident slot it would cut back
by a sequence's worth (another conversation's KV, kept for its next turn).

Invariants:
- a resident entry names a free slot whose KV holds exactly its tokens: inserted as its slot is
  freed, taken or evicted before the slot is used again;
- a locked slot is never evicted, nor a warming sequence locked in it made to yield: the queue's
  first request is matched once it is first, and what it matched stays until it is admitted
  (or leaves the queue);
- a stored state is never changed (its data is the cache's too).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from reame import metrics
from reame.cache.snapshot_policy import MIN_RESIDENT
from reame.engine.exact_reuse import Computed, reuse_length
from reame.engine.exact_steps import ExactPaths
from reame.engine.sequence import Sequence
from reame.saved_state import SavedState, common_length

# NOTE: the last final states read, held past the stores' bounds (they may have let them go)
MAX_FINALS = 4
TIERS = ("resident", "warming", "pinned", "ram", "disk", "shared")


@dataclass(slots=True, frozen=True)
class Resident:
    """What a sequence left in its slot's KV (none of the request's sink or sampler: nothing of
    a client is kept alive by it)."""

    tokens: list[int]  # the tokens its KV holds
    chunk_ends: list[int]
    chunks: list[tuple[int, int]]
    scope: str
    num_prompt: int
    session: str  # GenerationRequest.session: "" for none
    # its prompt's last logits when it holds exactly its prompt (Sequence.prompt_logits)
    prompt_logits: np.ndarray | None = None

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
            seq.prompt_logits if length >= seq.num_prompt else None,
        )

    def answers_whole(self, seq: Sequence, can_cut: bool) -> bool:
        """Its prompt is `seq`'s, and it knows that prompt's last logits: `seq` computes
        nothing of it (its answer after it cut off, where the memory can be cut; not a group,
        whose candidates copy a computed prompt, nor a request whose grammar may force its
        first tokens)."""
        prompt = seq.request.prompt
        n = len(prompt)
        return (
            self.prompt_logits is not None
            and self.num_prompt == n
            and (can_cut or len(self.tokens) == n)
            and not seq.forks
            and seq.constraint is None
            and self.tokens[:n] == prompt
        )

    @property
    def prompt_length(self) -> int:
        return self.num_prompt

    @property
    def known_ends(self) -> list[int]:
        return self.chunk_ends


@dataclass(slots=True, frozen=True)
class Match:
    """Where a request goes on from: `length` leading tokens of its prompt, computed by `held`
    (whose chunks up to there the request inherits)."""

    tier: str  # one of TIERS
    length: int
    held: Computed
    slot: int = -1  # resident or warming: the slot whose KV holds them
    state: SavedState | None = None  # pinned, ram, disk or shared: the state to restore
    # the whole prompt is held, and its last token's logits pick the first token
    prompt_logits: np.ndarray | None = None


class ReuseIndex:
    def __init__(self, can_cut: bool, budget: int, paths: ExactPaths | None = None) -> None:
        """`can_cut`: the memory can be cut back to any position; `budget`: a step's tokens at
        most (where a cold request's chunks end); `paths`: the runner's, whose granule (the
        rows a chunk's weights take in groups) the engine measures at start."""
        self._can_cut = can_cut
        self._budget = budget
        self._paths = paths if paths is not None else ExactPaths()
        self._resident: dict[int, Resident] = {}  # least recently inserted first
        self._locks: Counter[int] = Counter()
        self._finals: deque[tuple[str, SavedState]] = deque(maxlen=MAX_FINALS)  # scope, state

    @property
    def granule(self) -> int:
        """The rows a chunk's weights take in groups (engine/exact_run.py row_granule): 1 until
        the engine has measured them."""
        return self._paths.granule

    def match(
        self, seq: Sequence, warming: Iterable[Sequence] = (), spare: bool = False
    ) -> Match | None:
        """The longest reusable start of `seq`'s prompt over every tier, None if nothing is
        worth going on from (a resident prefix shorter than MIN_RESIDENT is not). `spare`: a
        free slot holds nothing, so a stored state as long can be restored there rather than
        another conversation's KV cut back."""
        request = seq.request
        found: list[Match] = []
        for slot, resident in self._resident.items():
            if resident.scope == request.scope:
                if resident.answers_whole(seq, self._can_cut):
                    n, logits = seq.num_prompt, resident.prompt_logits
                    found.append(Match("resident", n, resident, slot, prompt_logits=logits))
                    continue
                length = self._usable(resident, seq)
                if length >= MIN_RESIDENT:
                    found.append(Match("resident", length, resident, slot))
        if not seq.forks:  # NOTE: a group's candidates copy the prompt's slot: it stays theirs
            for warm in warming:
                if warm.request.scope == request.scope:
                    held = Resident.of(warm, warm.num_computed)
                    length = self._usable(held, seq)
                    # NOTE: its state is not read yet: taken over for less than it computed,
                    # its conversation's would be lost (a next turn computed 84 tokens, not 20;
                    # 2 of 4 requests sharing 28 tokens took one over once its idle-time work
                    # waited for them, stop 55). It yields instead, read first.
                    if length < warm.num_computed:
                        continue
                    found.append(Match("warming", length, held, warm.slot))
        for stored in request.stored:
            length = self._usable(stored.state, seq)
            found.append(Match(stored.tier, length, stored.state, state=stored.state))
        for scope, final in self._finals:
            if final.session != request.session or any(s.state is final for s in request.stored):
                continue
            if final.session:  # NOTE: a session's is its owner's
                found.append(Match("pinned", self._usable(final, seq), final, state=final))
            elif scope == request.scope and (length := self._usable(final, seq)) >= MIN_RESIDENT:
                found.append(Match("ram", length, final, state=final))
        # NOTE: every request behind one system prompt went on in the one slot that held it
        # (the first of equal length), cutting back the conversation there: at the Qwen3 1.7B
        # shape three slots of four stayed empty, and a history computed ahead, queued behind
        # others, found its conversation gone and computed it again from the system prompt's
        # end (226 tokens where 115 would do: docs/replay/stop58-long-answers)
        best = max(
            (m for m in found if m.length > 0),
            key=lambda m: (m.length, not (spare and self._cuts_off(m)), -TIERS.index(m.tier)),
            default=None,
        )
        metrics.REUSE_MATCHES.labels(best.tier if best else "none").inc()
        return best

    @staticmethod
    def _cuts_off(match: Match) -> bool:
        """Going on from `match` cuts a resident slot's KV back by a sequence's worth."""
        return match.tier == "resident" and len(match.held.tokens) - match.length >= MIN_RESIDENT

    def holds(self, slot: int) -> bool:
        """A free slot's KV holds a resident entry."""
        return slot in self._resident

    def _usable(self, held: Computed, seq: Sequence) -> int:
        """How much of `held` the request of `seq` goes on from (0: none): what they share
        but the prompt's last token (whose logits pick the first new one), as far as that
        stays exact (reuse_length, with the cuts the request's chunks end at), and on memory
        that cannot be cut back, all of what `held` holds or nothing."""
        request = seq.request
        common = common_length(held.tokens, request.prompt[:-1])
        length = reuse_length(
            common,
            held,
            request.session,
            request.cold_cuts,
            seq.snapshots_due,
            seq.num_prompt,
            self._budget,
            self.granule,
        )
        if not self._can_cut and length != len(held.tokens):
            return 0
        return length

    def kept_final(self, state: SavedState, scope: str) -> None:
        """An answer's final state was read: it reaches the stores through the outbox, after the
        answer has gone out, so a next turn prefetched meanwhile misses it there, and the slot
        that held it may be taken before that turn is matched (stop 45: a chain's second call
        computed its whole prompt; stop 55: a chat's next turn, its history computed ahead,
        computed 84 tokens, not 20). The last few are held here: a session's for that session
        (its newer one replaces it), anyone's for requests of no session in its scope."""
        if state.session:
            kept = [k for k in self._finals if k[1].session != state.session]
            self._finals = deque(kept, maxlen=MAX_FINALS)
        self._finals.append((scope, state))

    def insert(self, slot: int, resident: Resident) -> None:
        """A freed slot's KV holds `resident` (it replaces what the slot held before)."""
        self._resident.pop(slot, None)
        self._resident[slot] = resident

    def take(self, slot: int) -> Resident | None:
        """The slot is used again: what it held is no longer in the index."""
        self._locks.pop(slot, None)
        return self._resident.pop(slot, None)

    def evict(self, among: Iterable[int]) -> int | None:
        """Of the slots `among` (free ones), the one to empty: the lowest holding nothing, else
        the least recently inserted resident one that is not locked; None if every one is
        locked. (The caller `take`s it, and clears its KV if it held something.)"""
        slots = set(among)
        empty = slots - self._resident.keys()
        if empty:
            return min(empty)
        return next((s for s in self._resident if s in slots and not self._locks[s]), None)

    def lock(self, match: Match | None) -> None:
        """What `match` named stays: not evicted, not yielded (no effect on a stored state: the
        match holds it)."""
        if match is not None and match.slot >= 0:
            self._locks[match.slot] += 1

    def unlock(self, match: Match | None) -> None:
        if match is not None and match.slot >= 0 and self._locks[match.slot] > 0:
            self._locks[match.slot] -= 1
            if not self._locks[match.slot]:
                del self._locks[match.slot]

    def is_locked(self, slot: int) -> bool:
        return self._locks[slot] > 0
