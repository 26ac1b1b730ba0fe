"""Conversations whose computed state is kept between turns, so a turn computes only what is new.

Bounded in number and in bytes (least recently used goes first) and expired when idle. A session
belongs to the key that made it (`owner`, a digest of the bearer key): under another key the same
id names another session, so no key can list, read, extend or delete another's. Used from the
event loop and from the worker threads that look prefixes up, so every use holds one lock; a
state kept on the engine thread (after warm-ahead) comes in through a queue the next use empties.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from reame import metrics
from reame.saved_state import SavedState

MAX_LATER = 1024  # states waiting to be pinned, the oldest dropped past it


@dataclass(slots=True)
class Session:
    session_id: str
    owner: str
    created: float
    last_used: float
    state: SavedState | None = None
    num_turns: int = 0

    @property
    def num_bytes(self) -> int:
        return self.state.num_bytes if self.state else 0

    def describe(self) -> dict[str, object]:
        return {
            "id": self.session_id,
            "object": "session",
            "created": int(self.created),
            "last_used": int(self.last_used),
            "turns": self.num_turns,
            "cached_tokens": len(self.state.tokens) if self.state else 0,
            "bytes": self.num_bytes,
        }


class SessionStore:
    def __init__(
        self,
        max_sessions: int,
        max_bytes: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.time,
        max_per_owner: int | None = None,
    ) -> None:
        """`max_per_owner`: sessions one key may hold (its own oldest goes first past it);
        None: no such bound. The unkeyed owner "" (a server without keys) is never bound."""
        self.max_sessions, self.max_bytes, self.idle_seconds = max_sessions, max_bytes, idle_seconds
        self.max_per_owner = max_per_owner
        self._clock = clock
        self._sessions: OrderedDict[tuple[str, str], Session] = OrderedDict()
        # states the engine kept for sessions, pinned at the store's next use (NOTE: append is
        # atomic); one whose session opens with its turn's count waits for it
        self._later: deque[tuple[str, str, SavedState]] = deque(maxlen=MAX_LATER)
        self._lock = threading.RLock()

    @property
    def num_bytes(self) -> int:
        with self._lock:
            return sum(s.num_bytes for s in self._sessions.values())

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str, owner: str = "") -> Session | None:
        with self._lock:
            self._take_later()
            self.expire()
            key = (owner, session_id)
            session = self._sessions.get(key)
            if session is not None:
                session.last_used = self._clock()
                self._sessions.move_to_end(key)
            return session

    def open(self, session_id: str, owner: str = "") -> Session:
        with self._lock:
            session = self.get(session_id, owner)
            if session is None:
                now = self._clock()
                key = (owner, session_id)
                session = self._sessions[key] = Session(session_id, owner, now, now)
                self._evict_own(owner, keep=key)
                self._evict(keep=key)
                self._publish()
            return session

    def count_turn(self, session_id: str, owner: str = "") -> Session:
        """A turn of the session ended (opening it on its first): its state comes through
        pin_later, before or after."""
        with self._lock:
            session = self.open(session_id, owner)
            session.num_turns += 1
            session.last_used = self._clock()
            self._take_later()
            return session

    def pin_later(self, session_id: str, state: SavedState, owner: str = "") -> None:
        """From any thread: keep `state` for the session once the store is next used (once
        the session is open), unless what it holds then goes on from it (a later turn's)."""
        self._later.append((owner, session_id, state))

    def _take_later(self) -> None:
        waiting = []
        while self._later:
            owner, session_id, state = self._later.popleft()
            session = self._sessions.get((owner, session_id))
            if session is None:
                waiting.append((owner, session_id, state))
                continue
            pinned = session.state
            n = len(state.tokens)
            if pinned is not None and n < len(pinned.tokens) and pinned.tokens[:n] == state.tokens:
                continue  # NOTE: an earlier state of what it holds (warmed after a later turn)
            self._keep(session, state)
        self._later.extendleft(reversed(waiting))

    def _keep(self, session: Session, state: SavedState) -> None:
        session_id, owner = session.session_id, session.owner
        # NOTE: a state larger than the whole budget is not kept; the session lives on without it
        session.state = state if state.num_bytes <= self.max_bytes else None
        key = (owner, session_id)
        self._sessions.move_to_end(key)
        self._evict(keep=key)
        self._publish()

    def delete(self, session_id: str, owner: str = "") -> bool:
        with self._lock:
            self._take_later()
            is_deleted = self._sessions.pop((owner, session_id), None) is not None
            kept = [e for e in self._later if e[:2] != (owner, session_id)]
            self._later.clear()
            self._later.extend(kept)
            self._publish()
            return is_deleted

    def list(self, owner: str = "") -> list[Session]:
        with self._lock:
            self._take_later()
            self.expire()
            return [s for s in self._sessions.values() if s.owner == owner]

    def expire(self) -> int:
        with self._lock:
            cutoff = self._clock() - self.idle_seconds
            stale = [sid for sid, s in self._sessions.items() if s.last_used < cutoff]
            for sid in stale:
                del self._sessions[sid]
            if stale:
                self._publish()
            return len(stale)

    def _publish(self) -> None:
        metrics.SESSIONS.set(len(self._sessions))
        metrics.SESSION_BYTES.set(self.num_bytes)

    def _evict_own(self, owner: str, keep: tuple[str, str]) -> None:
        """A key past its share loses its own least recently used sessions, nobody else's."""
        if not owner or self.max_per_owner is None:
            return
        own = [k for k in self._sessions if k[0] == owner and k != keep]
        for k in own[: max(0, len(own) + 1 - self.max_per_owner)]:
            del self._sessions[k]

    def _evict(self, keep: tuple[str, str]) -> None:
        for sid in list(self._sessions):
            if len(self._sessions) <= self.max_sessions and self.num_bytes <= self.max_bytes:
                return
            if sid != keep:
                del self._sessions[sid]
        if len(self._sessions) > self.max_sessions:
            self._sessions.pop(keep, None)
