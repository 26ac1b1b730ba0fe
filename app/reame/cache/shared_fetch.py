"""The shared tier's states as one replica finds them: by a whole prefix of a prompt (every group
listed in one round trip) or by a prefix they share with it and then part from (the block
listings, SharedStore.branches); each fetched, decoded and checked before it is trusted. A
corrupt one is removed from the tier; one of another kind of replica (another model, build or
KV layout) is set aside, not fetched again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from reame import metrics
from reame.cache.fingerprint import Fingerprint
from reame.cache.keys import group_chain, group_of, prefix_key
from reame.cache.shared_store import SharedStore
from reame.cache.snapshot_format import SnapshotError, decode
from reame.saved_state import SavedState

log = structlog.get_logger("reame.cache")

MAX_FOREIGN = 4096
MAX_PARTIAL_FETCHES = 2  # shared states fetched a lookup by the longest common prefix, at most


@dataclass(slots=True, frozen=True)
class Fetched:
    group: str
    key: str
    state: SavedState
    data: bytes  # as the tier holds it (the disk tier writes the same bytes)


class SharedFetch:
    def __init__(self, shared: SharedStore, fingerprint: Fingerprint, min_tokens: int) -> None:
        self.shared, self.fingerprint, self.min_tokens = shared, fingerprint, min_tokens
        self._foreign: set[str] = set()  # shared entries of another kind of replica

    def whole(self, chain: list[str], tokens: list[int], lowest: int, floor: int) -> Fetched | None:
        """The longest prefix of `tokens` longer than `floor` that checks out: every group from
        `lowest` up listed in one round trip, then fetched longest first."""
        groups = chain[lowest:]
        found = sorted(
            (
                (length, key, group)
                for group, entries in zip(groups, self.shared.entries(groups), strict=True)
                for length, key in entries
                if max(floor + 1, self.min_tokens) <= length <= len(tokens)
                and key not in self._foreign
                and key == prefix_key(chain, tokens, length)
            ),
            reverse=True,
        )
        for length, key, group in found:
            fetched = self._fetch(group, length, key)
            if fetched is None:
                continue
            if list(fetched.state.tokens) != tokens[:length]:
                metrics.PREFIX_REJECTED.labels("tokens").inc()
                self.shared.forget(group, length, key)  # its key names other tokens: no one's
                continue
            return fetched
        return None

    def partial(
        self,
        chain: list[str],
        tokens: list[int],
        scope: str,
        lowest: int,
        floor: int,
        is_local: Callable[[str], bool],
    ) -> Fetched | None:
        """A state that shares more than `floor` tokens with `tokens` and then goes on
        otherwise: listed under the deepest of the prompt's blocks from `lowest` it goes on
        past, not `is_local` already; checked against its own tokens (its key and group). At
        most MAX_PARTIAL_FETCHES fetched: each is a whole state."""
        listed = self.shared.branches(chain[lowest:])
        fetches = 0
        for found in reversed(listed):
            for group, length, key in found:
                if length <= floor or key in self._foreign or is_local(key):
                    continue
                if fetches == MAX_PARTIAL_FETCHES:
                    return None
                fetches += 1
                fetched = self._fetch(group, length, key)
                if fetched is None:
                    continue
                state = fetched.state
                own = group_chain(state.tokens, scope)
                if (
                    len(state.tokens) != length
                    or own[group_of(length)] != group
                    or prefix_key(own, state.tokens, length) != key
                ):
                    metrics.PREFIX_REJECTED.labels("tokens").inc()
                    self.shared.forget(group, length, key)  # its key names other tokens
                    continue
                if state.common_length(tokens) <= max(floor, self.min_tokens - 1):
                    continue
                return fetched
        return None

    def _fetch(self, group: str, length: int, key: str) -> Fetched | None:
        """A shared snapshot fetched and decoded (its tokens not yet checked); None if it is
        not there or does not check out."""
        with metrics.PREFIX_LOAD_SECONDS.labels("shared", "fetch").time():
            data = self.shared.get(group, length, key)
        if data is None:  # evicted, refused or not answered: counted (and cleaned) there
            return None
        metrics.PREFIX_LOAD_BYTES.labels("shared").inc(len(data))
        try:
            with metrics.PREFIX_LOAD_SECONDS.labels("shared", "decode").time():
                state = decode(data, self.fingerprint, self.shared.bound.state_bytes(length))
        except SnapshotError as exc:
            metrics.PREFIX_REJECTED.labels(exc.reason).inc()
            log.warning("shared snapshot refused", key=key, reason=str(exc))
            if exc.reason == "corrupt":  # a foreign one is its writer's; a corrupt one no one's
                self.shared.forget(group, length, key)
            elif len(self._foreign) < MAX_FOREIGN:  # NOTE: not fetched again, every request
                self._foreign.add(key)
            return None
        return Fetched(group, key, state, data)
