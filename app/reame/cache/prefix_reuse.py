"""The one interface to what was computed before: match the longest stored prefix of a prompt,
insert a computed state, pin (and unpin) a session's; and, by the snapshot policy, what of a new
request's computation is kept. Eviction is each tier's own: the RAM and disk tiers and the
sessions let their least recently used go as they pass their budgets, sessions also when idle.

The tiers behind it, tried longest first and in this order on a tie:
- resident: a free llama sequence whose KV still holds a finished prompt (engine/slots.py). Only
  the engine thread knows what its sequences hold, so it matches there, at admission, against
  what this interface found: nothing is copied when the resident prefix is at least as long;
- pinned: a session's state (sessions.py), matched only by requests of that session, kept
  whatever the cache's LRU does until the session is deleted or idles out (its own budget);
- host RAM, then disk (cache/prefix_cache.py), shared within a scope.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from reame.cache.prefix_cache import PrefixCache
from reame.cache.snapshot_policy import MIN_NEW_FOR_FINAL, SnapshotPolicy
from reame.engine.exact_reuse import reuse_length
from reame.engine.outbox import Kept
from reame.engine.request import FinishEvent
from reame.saved_state import SavedState
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
class Match:
    state: SavedState
    tier: str  # "pinned", "ram", "disk" or "shared"
    length: int  # leading tokens of the prompt it gives (what it shares, or less: exactness)


@dataclass(slots=True, frozen=True)
class Reuse:
    """How one request reuses and adds to what is stored (the engine request's fields)."""

    prefix: SavedState | None  # restored instead of computing its common prefix
    snapshot_at: tuple[int, ...]  # prompt lengths whose states are kept
    keep_state: bool  # the final state comes back with the finish event...
    keep_state_min_new: int  # ...if the request computed this many beyond what it restored
    cold_cuts: tuple[int, ...] = ()  # its snapshot points on an empty cache


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

    def match(
        self,
        tokens: list[int],
        scope: str,
        session: SessionKey | None,
        cold_cuts: tuple[int, ...] = (),
    ) -> Match | None:
        """The stored state this request goes on from furthest: its session's, the longest
        stored prefix of `tokens`, or a state that shares more of them and then goes on
        otherwise (restored and cut back, as far as the exactness rule allows: `length` is
        that far). Checked token by token. Mutates recency only (and a disk hit is copied into
        RAM); may read the disk: call it off the event loop."""
        found: list[Match] = []
        session_id = ""
        if session is not None:
            session_id = session.name
            pinned = self.sessions.get(session.session_id, session.owner)
            if pinned is not None and pinned.state is not None:
                found.append(Match(pinned.state, "pinned", 0))
        if self.cache is not None:
            started = time.perf_counter()
            whole = self.cache.lookup(tokens, scope)
            floor = len(whole.state.tokens) if whole is not None else 0
            # NOTE: memory that cannot be cut goes on from a whole stored prefix only
            longer = self.cache.longer(tokens, scope, floor) if self._can_cut else None
            hits = [h for h in (whole, longer) if h is not None]
            found += [Match(h.state, h.source, 0) for h in hits]
            log.debug(
                "prefix cache lookup",
                found=[h.source + ("_partial" * h.is_partial) for h in hits],
                ms=round(1000 * (time.perf_counter() - started), 1),
            )
        best: Match | None = None
        for match in found:
            common = match.state.common_length(tokens[:-1])
            length = reuse_length(
                common, match.state, session_id, cold_cuts, cold_cuts, len(tokens), self._budget
            )
            if length > 0 and (best is None or length > best.length):
                best = Match(match.state, match.tier, length)
        return best

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
        """What a request starts from and keeps: the longest match; snapshots at the policy's
        points past it (but not of a prefix already stored); its final state, for a session
        always, else when it adds a block (the next turn starts with this prompt and answer)."""
        points: tuple[int, ...] = ()
        cold: tuple[int, ...] = ()
        cache = self.cache
        # NOTE: a request restores at most its prompt but the last token (whose logits it
        # needs); a recurrent state cannot be cut back to that, so it is saved there
        end = len(tokens) if self._can_cut else len(tokens) - 1
        if cache is not None:
            cold = cache.policy.points(end, list(marks), must=must)
        found = self.match(tokens, scope, session, cold)
        prefix = found.state if found is not None else None
        if cache is not None and take_snapshots:
            base = found.length if found is not None else 0
            # NOTE: where the memory can be cut back, an answer's start needs no snapshot (the
            # resident sequence is cut there, exact_reuse keeping to the cold cuts); a snapshot
            # read there would stand between the prompt and its first token
            kept = must if not self._can_cut else ()
            wanted = cache.policy.points(end, list(marks), base, kept)
            points = tuple(p for p in wanted if not cache.holds(tokens, p, scope))
        keeps_final = session is not None or (cache is not None and take_snapshots)
        min_new = 0 if session is not None else MIN_NEW_FOR_FINAL
        return Reuse(prefix, points, keeps_final, min_new, cold)

    def finished(self, event: FinishEvent, session: SessionKey | None) -> None:
        """Book a turn of its session and what reuse saved (its state comes through keep)."""
        if session is not None:
            self.sessions.count_turn(session.session_id, session.owner)
        if self.cache is not None:
            self.cache.count_tokens(event.num_cached_tokens, event.num_prompt_tokens)
