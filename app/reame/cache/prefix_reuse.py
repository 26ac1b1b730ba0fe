"""What a worker thread does for reuse, before a request is queued, and what comes back after:
the stored states it may go on from, found and read into memory (`prefetch`: its session's
pinned state, the longest stored prefix of its prompt, a stored state that shares more and then
parts), and by the snapshot policy what of its computation is kept; then the states the engine
hands back (`keep`: one channel), pinned for their session and offered to the cache. Which state
a request goes on from, and how far, the engine decides, in one place (engine/reuse_index.py).
Eviction is each tier's own: the RAM and disk tiers and the sessions let their least recently
used go as they pass their budgets, sessions also when idle.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from reame.cache.prefix_cache import PrefixCache
from reame.cache.snapshot_policy import MIN_NEW_FOR_FINAL, SnapshotPolicy
from reame.engine.exact_reuse import TILED_QUERIES
from reame.engine.outbox import Kept
from reame.engine.request import FinishEvent
from reame.saved_state import Stored
from reame.sessions import SessionStore

log = structlog.get_logger("reame.cache")


@dataclass(slots=True, frozen=True)
class SessionKey:
    owner: str  # a digest of the bearer key ("" without keys)
    session_id: str

    @property
    def name(self) -> str:
        """What the engine knows it by (GenerationRequest.session)."""
        return f"{self.owner}/{self.session_id}"


@dataclass(slots=True, frozen=True)
class Reuse:
    """How one request reuses and adds to what is stored (the engine request's fields)."""

    stored: tuple[Stored, ...]  # what it may go on from (the engine picks)
    snapshot_at: tuple[int, ...]  # prompt lengths whose states are kept
    keep_state: bool  # the final state comes back with the finish event...
    keep_state_min_new: int  # ...if the request computed this many beyond what it restored
    cold_cuts: tuple[int, ...] = ()  # its snapshot points on an empty cache
    cut_at: tuple[int, ...] = ()  # where its chunks end with no snapshot (an answer's start)


class PrefixReuse:
    def __init__(
        self,
        cache: PrefixCache | None,
        sessions: SessionStore,
        can_cut: bool = True,
        budget: int = 512,
    ) -> None:
        """`cache`: None when the prefix cache is off (sessions still keep their states).
        `can_cut`: False for memory that cannot be cut back (recurrent layers). `budget`: a
        step's tokens at most (where a cold request's chunks end)."""
        self.cache, self.sessions = cache, sessions
        self._can_cut = can_cut
        self._budget = budget

    def prefetch(
        self, tokens: list[int], scope: str, session: SessionKey | None
    ) -> tuple[Stored, ...]:
        """The stored states a request of `tokens` may go on from, in memory: its session's,
        the longest stored prefix of `tokens`, and states that share more of them and then
        part (cut back when restored; not on memory that cannot be cut): the one sharing the
        most, and up to two more in RAM (PrefixCache.longer). Checked token by
        token. Mutates recency only (a disk or shared hit is read into RAM); may read the
        disk: call it off the event loop."""
        found: list[Stored] = []
        if session is not None:
            pinned = self.sessions.get(session.session_id, session.owner)
            if pinned is not None and pinned.state is not None:
                found.append(Stored("pinned", pinned.state))
        if self.cache is not None:
            started = time.perf_counter()
            whole = self.cache.lookup(tokens, scope)
            floor = len(whole.state.tokens) if whole is not None else 0
            hits = [whole] if whole is not None else []
            # NOTE: memory that cannot be cut goes on from a whole stored prefix only; the one
            # sharing the most may not be the one used most
            if self._can_cut:
                hits += self.cache.longer(tokens, scope, floor, more=2)
            found += [Stored(h.source, h.state) for h in hits]
            log.debug(
                "prefix cache lookup",
                found=[h.source + ("_partial" * h.is_partial) for h in hits],
                ms=round(1000 * (time.perf_counter() - started), 1),
            )
        return tuple(found)

    @staticmethod
    def shared(stored: tuple[Stored, ...], tokens: list[int]) -> int:
        """How far the stored states go along `tokens` (but its last token): snapshots are
        taken past there. (How much of that the request uses is the engine's one decision,
        engine/reuse_index.py; a snapshot point it then stands too close to is dropped,
        exact_reuse.cuts_past.)"""
        return max((s.state.common_length(tokens[:-1]) for s in stored), default=0)

    def keep(self, kept: Kept) -> None:
        """The one way a computed state comes back from the engine (on its thread): a snapshot
        goes to the cache for every request of its scope (RAM now, disk soon; the tiers evict
        their least recently used past their budgets); a final state is pinned for its session
        (its next turn goes on from it wherever they part, reuse_length), and goes to the
        cache unless it is a session's that adds less than a block to what it restored."""
        state = kept.state
        if kept.is_final and state.session:
            owner, _, session_id = state.session.partition("/")  # SessionKey.name
            self.sessions.pin_later(session_id, state, owner)
        if self.cache is None:
            return
        if not (kept.is_final and state.session) or SnapshotPolicy.keeps_final(
            len(state.tokens), kept.num_restored
        ):
            self.cache.offer(state, kept.scope)

    def unpin(self, session: SessionKey) -> bool:
        """Let go of a session's state (the session is deleted); False if there was none."""
        return self.sessions.delete(session.session_id, session.owner)

    def plan(
        self,
        tokens: list[int],
        scope: str,
        session: SessionKey | None,
        marks: tuple[int, ...],
        take_snapshots: bool,
        must: tuple[int, ...] = (),
    ) -> Reuse:
        """What a request may start from and keeps: the stored states found; snapshots at the
        policy's points past what it would use of them (but not of a prefix already stored);
        its final state, for a session always, else when it adds a block (the next turn starts
        with this prompt and answer), but for none where the history is computed ahead."""
        points: tuple[int, ...] = ()
        cold: tuple[int, ...] = ()
        cuts: tuple[int, ...] = ()
        cache = self.cache
        # NOTE: a request restores at most its prompt but the last token (whose logits it
        # needs); a recurrent state cannot be cut back to that, so it is saved there
        end = len(tokens) if self._can_cut else len(tokens) - 1
        if cache is not None:
            # NOTE: a recurrent state is read back at an answer's start however close
            spacing = TILED_QUERIES if self._can_cut else 0
            cold = cache.policy.points(end, list(marks), must=must, spacing=spacing)
        stored = self.prefetch(tokens, scope, session)
        if cache is not None and take_snapshots:
            base = self.shared(stored, tokens)
            # NOTE: where the memory can be cut back, an answer's start needs no snapshot (the
            # resident sequence is cut there, exact_reuse keeping to the cold cuts); a snapshot
            # read there would stand between the prompt and its first token
            kept = must if not self._can_cut else ()
            wanted = cache.policy.points(end, list(marks), base, kept)
            points = tuple(p for p in wanted if not cache.holds(tokens, p, scope))
            # NOTE: but its chunks end at every cold request's cut, kept or not (exact_reuse
            # judges a reuse by the rest computed as a cold request computes it;
            # exact_reuse.cuts_past drops a cut less than a tiled chunk past what the request
            # restores). Without the answer's start, a turn that restored nothing computed its
            # prompt in one chunk and its history was computed again: 492 tokens where 58
            # would do; without a system prompt already held, no reuse was exact and the one
            # taken was not (greedy answers differed: docs/replay/stop52-widened)
            cuts = tuple(p for p in cold if 0 < p < end) if self._can_cut else ()
        # NOTE: an answer whose history is computed ahead (`must`: its template drops the
        # thought) keeps no final state: the next turn parts from it where the answer starts,
        # and at the Qwen3 1.7B shape reading it out took 0.2 s of each second's pause
        # between turns, the time the history needed (docs/replay/stop57-final-states)
        keeps_final = not must and (session is not None or (cache is not None and take_snapshots))
        min_new = 0 if session is not None else MIN_NEW_FOR_FINAL
        return Reuse(stored, points, keeps_final, min_new, cold, cuts)

    def finished(self, event: FinishEvent, session: SessionKey | None) -> None:
        """Book a turn of its session and what reuse saved (its state comes through keep)."""
        if session is not None:
            self.sessions.count_turn(session.session_id, session.owner)
        if self.cache is not None:
            self.cache.count_tokens(event.num_cached_tokens, event.num_prompt_tokens)
