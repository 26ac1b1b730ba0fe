"""The persistent shared-prefix cache: the longest stored prefix of a prompt, from host memory
(RAM tier), from disk (shared by the machine's processes) or from the shared tier (a Valkey or
Redis server shared by replicas), and new prefix states kept for the requests that follow. Disk
and shared writes run on a background thread with a bounded queue: the same encoded bytes go to
disk, then to the shared tier."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from reame import metrics
from reame.cache.disk_index import index_disk
from reame.cache.disk_tier import DiskTier
from reame.cache.fingerprint import Fingerprint
from reame.cache.keys import group_chain, group_of, prefix_key
from reame.cache.prefix_index import PrefixIndex, Shared
from reame.cache.ram_tier import RamTier
from reame.cache.shared_fetch import Fetched, SharedFetch
from reame.cache.shared_store import SharedStore
from reame.cache.snapshot_format import SnapshotError, decode
from reame.cache.snapshot_policy import SnapshotPolicy
from reame.cache.snapshot_writer import SnapshotWriter, Write
from reame.saved_state import SavedState

log = structlog.get_logger("reame.cache")


@dataclass(slots=True, frozen=True)
class Hit:
    state: SavedState
    source: str  # "ram", "disk" or "shared"
    # the state goes on past where the prompt leaves it: restored, it is cut back there
    is_partial: bool = False


@dataclass(slots=True, frozen=True)
class CacheConfig:
    directory: Path | None  # None: RAM tier only
    ram_bytes: int
    disk_bytes: int
    compression_level: int = 1
    min_tokens: int = 64
    max_snapshots: int = 4  # where snapshots go: SnapshotPolicy
    stride: int = 512
    queue_size: int = 8
    # and at most this many bytes of waiting states that the RAM tier has let go (a state may be
    # tens of MB, and then the queue alone holds it in memory)
    queue_bytes: int = 256 << 20
    # disk writes wait while requests compute (compressing 30 MB takes a core from the decode
    # threads of a 2-core machine), but never longer than this
    max_write_delay: float = 10.0
    write_quiet: float = 1.0
    # memory that can be cut back: a state kept serves every prefix of it at its chunk ends, so
    # the RAM copies of those prefixes are let go (their files are still written)
    longer_serves_prefixes: bool = False


class PrefixCache:
    def __init__(
        self,
        config: CacheConfig,
        fingerprint: Fingerprint | str,
        shared: SharedStore | None = None,
    ) -> None:
        if isinstance(fingerprint, str):  # a key alone: no parts to name a mismatch by
            fingerprint = Fingerprint(fingerprint, {})
        self.config, self.fingerprint, self.shared = config, fingerprint, shared
        self.policy = SnapshotPolicy(config.min_tokens, config.max_snapshots, config.stride)
        self.ram = RamTier(config.ram_bytes)
        self.index = PrefixIndex()  # the states of both tiers, by their longest common prefix
        self.disk = (
            DiskTier(config.directory, fingerprint.key, config.disk_bytes)
            if config.directory is not None
            else None
        )
        self._tokens = {"reused": 0, "computed": 0}
        self._ram_evictions_seen = 0
        self.fetch = (
            SharedFetch(shared, fingerprint, config.min_tokens) if shared is not None else None
        )
        if self.disk is not None:
            self.disk.remove_stale_parts()
            index_disk(self.disk, self.index, self.fingerprint)
        self.writer = (
            SnapshotWriter(config, fingerprint, self.disk, shared)
            if self.disk is not None or shared is not None
            else None
        )
        if self.writer is not None:
            self.writer.is_kept = lambda write: self.ram.holds(write.key, write.state)

    # -- lookups (any thread) ---------------------------------------------------------------

    def lookup(self, tokens: list[int], scope: str = "") -> Hit | None:
        """The longest stored prefix of `tokens` (it may be all of them), checked token by
        token; None on a miss. Corrupt or foreign files met on the way are removed."""
        n = len(tokens)
        hit = (
            self._find(group_chain(tokens, scope), tokens) if n >= self.config.min_tokens else None
        )
        metrics.PREFIX_LOOKUPS.labels(hit.source if hit else "miss").inc()
        return hit

    def longer(self, tokens: list[int], scope: str, floor: int, more: int = 0) -> list[Hit]:
        """States that share more than `floor` leading tokens with `tokens` and then go on
        otherwise, checked token by token, from one look at the index: first the one sharing
        the most, of RAM or this process's disk (cache/prefix_index.py), else of the shared tier
        if it shares more; then up to `more` others in RAM, sharing the most first. One that
        shares fewer may serve more of them exactly: the engine takes the one it may go on from
        the furthest (engine/reuse_index.py). The others are not read from disk: a read for a
        state that may not be used is dear."""
        if len(tokens) < self.config.min_tokens:
            return []
        chain = group_chain(tokens, scope)
        ranked = [
            s
            for s in self.index.longest(chain, tokens)
            if s.length > max(floor, self.config.min_tokens - 1)
        ]
        hit = self._find_partial(ranked, tokens)
        if self.shared is not None:
            local = hit.state.common_length(tokens) if hit is not None else floor
            hit = self._find_shared_partial(chain, tokens, scope, local) or hit
        if hit is None:
            return []
        metrics.PREFIX_LOOKUPS.labels(f"{hit.source}_partial").inc()
        found = [hit]
        for shared in ranked:
            if len(found) > more:
                break
            state = self.ram.get(shared.entry.key)
            if state is None or any(state is h.state for h in found):
                continue
            if len(state.tokens) > shared.length == state.common_length(tokens):
                found.append(Hit(state, "ram", is_partial=True))
        return found

    def count_tokens(self, reused: int, total: int) -> None:
        """What a request finally restored of its prompt (the engine may use less of a hit)."""
        self._tokens["reused"] += reused
        self._tokens["computed"] += total - reused
        metrics.PREFIX_TOKENS.labels("reused").inc(reused)
        metrics.PREFIX_TOKENS.labels("computed").inc(total - reused)
        looked = self._tokens["reused"] + self._tokens["computed"]
        metrics.PREFIX_HIT_RATIO.set(self._tokens["reused"] / looked if looked else 0.0)

    def _find(self, chain: list[str], tokens: list[int]) -> Hit | None:
        lowest = group_of(self.config.min_tokens)
        local = self._find_local(chain, tokens, lowest, self._in_ram_past(chain, tokens))
        floor = len(local.state.tokens) if local is not None else 0
        self._refresh_prefixes(chain, tokens, floor)
        if self.shared is None or floor == len(tokens):
            return local
        return self._find_shared(chain, tokens, max(lowest, group_of(floor)), floor) or local

    def _find_partial(self, ranked: list[Shared], tokens: list[int]) -> Hit | None:
        for shared in ranked:
            entry = shared.entry
            length = len(entry.tokens)
            if length <= shared.length:  # a whole prefix: _find's (it was not there)
                continue
            state = self.ram.get(entry.key)
            source = "ram"
            if state is None and self.disk is not None:
                state, source = self._read(entry.group, length, entry.key), "disk"
            if state is None or state.common_length(tokens) != shared.length:
                self.index.discard(entry.key)
                continue
            if source == "disk":
                self.ram.put(entry.group, entry.key, state)
                self._publish_ram()
            return Hit(state, source, is_partial=True)
        return None

    def _find_local(
        self, chain: list[str], tokens: list[int], lowest: int, in_ram: int
    ) -> Hit | None:
        """The longest whole stored prefix, of RAM or disk; a file no longer than `in_ram` (a
        RAM state reaches that far along `tokens`, exactly: longer) is not read."""
        for k in range(len(chain) - 1, lowest - 1, -1):
            group = chain[k]
            for source in ("ram", "disk"):
                hit = self._find_in(source, group, chain, tokens, in_ram if source == "disk" else 0)
                if hit is not None:
                    return hit
        return None

    def _in_ram_past(self, chain: list[str], tokens: list[int]) -> int:
        """How far a RAM state that goes on past `tokens` or parts from them serves them,
        at one of its chunk ends: the longer one that let its prefixes go (offer). 0 on
        memory that cannot be cut: a request cannot go on from a longer state there."""
        if not self.config.longer_serves_prefixes:
            return 0
        for shared in self.index.longest(chain, tokens):
            state = self.ram.get(shared.entry.key)
            if state is not None and state.common_length(tokens) == shared.length:
                return max((e for e in state.known_ends if e <= shared.length), default=0)
        return 0

    def _find_shared(
        self, chain: list[str], tokens: list[int], lowest: int, floor: int
    ) -> Hit | None:
        """A prefix longer than `floor` from the shared tier, kept locally (RAM now, disk by the
        writer)."""
        assert self.fetch is not None
        found = self.fetch.whole(chain, tokens, lowest, floor)
        if found is None:
            return None
        self._keep_fetched(found, chain)
        return Hit(found.state, "shared")

    def _find_shared_partial(
        self, chain: list[str], tokens: list[int], scope: str, floor: int
    ) -> Hit | None:
        """A state of the shared tier that shares more than `floor` tokens with `tokens` and
        then goes on otherwise, kept locally."""
        assert self.fetch is not None
        lowest = max(group_of(self.config.min_tokens), group_of(floor))
        found = self.fetch.partial(chain, tokens, scope, lowest, floor, self.ram.contains)
        if found is None:
            return None
        self._keep_fetched(found, group_chain(found.state.tokens, scope))
        return Hit(found.state, "shared", is_partial=True)

    def _keep_fetched(self, found: Fetched, chain: list[str]) -> None:
        """A shared state that checked out, kept locally: RAM now, disk by the writer."""
        group, key, state = found.group, found.key, found.state
        self.ram.put(group, key, state)
        self.index.add(key, group, chain, state.tokens)
        self._publish_ram()
        if self.writer is not None and self.disk is not None:
            length = len(state.tokens)
            self.writer.enqueue(Write(group, length, key, state, found.data, to_shared=False))

    def _find_in(
        self, source: str, group: str, chain: list[str], tokens: list[int], floor: int = 0
    ) -> Hit | None:
        if source == "ram":
            entries = self.ram.entries(group)
        elif self.disk is not None:
            entries = [*self.disk.entries(group), *self._waiting(group)]
        else:
            return None
        for length, key in sorted(entries, reverse=True):
            if not max(self.config.min_tokens, floor + 1) <= length <= len(tokens):
                continue
            if key != prefix_key(chain, tokens, length):
                continue
            state = self.ram.get(key) if source == "ram" else self._read(group, length, key)
            if state is None:
                continue
            if list(state.tokens) != tokens[:length]:
                metrics.PREFIX_REJECTED.labels("tokens").inc()
                continue
            if source == "disk":
                self.ram.put(group, key, state)
                self.index.add(key, group, chain, state.tokens)
                self._publish_ram()
            return Hit(state, source)
        return None

    def _waiting(self, group: str) -> list[tuple[int, str]]:
        """(length, key) of the states of one group the writer has not written yet: RAM may
        have let them go (at the Qwen3 1.7B shape it holds about 8), and the writer waits for
        the engine's quiet (up to max_write_delay): a later turn missed its history so."""
        waiting = self.writer.waiting(group) if self.writer is not None else []
        return [(w.length, w.key) for w in waiting]

    def _read(self, group: str, length: int, key: str) -> SavedState | None:
        """A disk tier's state: its file, checked, or the writer's still queued copy."""
        assert self.disk is not None
        queued = self.writer.waiting_state(group, length, key) if self.writer else None
        if queued is not None:
            return queued
        path = self.disk.path(group, length, key)
        with metrics.PREFIX_LOAD_SECONDS.labels("disk", "fetch").time():
            data = self.disk.read(path)
        if data is None:
            return None
        metrics.PREFIX_LOAD_BYTES.labels("disk").inc(len(data))
        try:
            with metrics.PREFIX_LOAD_SECONDS.labels("disk", "decode").time():
                return decode(data, self.fingerprint)
        except SnapshotError as exc:
            metrics.PREFIX_REJECTED.labels(exc.reason).inc()
            log.warning("prefix cache file refused", path=str(path), reason=str(exc))
            with contextlib.suppress(OSError):
                self.disk.remove(path)
            return None

    def preload(self, group: str, length: int, key: str) -> bool:
        """Read one disk snapshot into RAM (cache/preload.py); False if it is not there, does
        not check out, or would not fit. Its tokens are checked against a prompt when used."""
        if not key or self.ram.contains(key) or self.disk is None:
            return False
        filed = self.index.tokens_of(key)
        if filed is not None:
            tokens = list(filed)
            if self._in_ram_past(group_chain(tokens), tokens) >= length:
                return False  # NOTE: a longer state loaded before it serves it (offer)
        state = self._read(group, length, key)
        if state is None or len(state.tokens) != length:
            return False
        if self.ram.num_bytes + state.num_bytes > self.ram.max_bytes:
            return False
        self.ram.put(group, key, state)
        # NOTE: a state kept for one key's scope names no scope: found by its whole prefix only
        chain = group_chain(state.tokens)
        if chain[group_of(length)] == group and prefix_key(chain, state.tokens, length) == key:
            self.index.add(key, group, chain, state.tokens)
        self._publish_ram()
        return True

    def holds(self, tokens: list[int], length: int, scope: str = "") -> bool:
        chain = group_chain(tokens[:length], scope)
        key = prefix_key(chain, tokens, length)
        if self.ram.contains(key):
            return True
        return (
            self.disk is not None and self.disk.path(chain[group_of(length)], length, key).exists()
        )

    # -- keeping states ---------------------------------------------------------------------

    def offer(self, state: SavedState, scope: str = "") -> None:
        """Keep a computed prefix state: in RAM now, on disk soon (dropped if the writer is
        behind). Called on the engine thread."""
        tokens = list(state.tokens)
        length = len(tokens)
        if length < self.config.min_tokens:
            return
        metrics.PREFIX_SNAPSHOTS.inc()
        chain = group_chain(tokens, scope)
        group, key = chain[group_of(length)], prefix_key(chain, tokens, length)
        self.ram.put(group, key, state)
        self.index.add(key, group, chain, tokens)
        covered = self._refresh_prefixes(chain, tokens, length)
        if self.config.longer_serves_prefixes and self.ram.contains(key):
            # NOTE: a prompt's snapshots and its answer's final state are prefixes of each
            # other: kept all, they held 3 copies of its KV, and RAM let go of the states of
            # a client that sent questions back to back 3 times as soon (their files stay)
            ends = set(state.known_ends)
            for stored, old in covered:
                if stored in ends:
                    self.ram.discard(old)
        if self.writer is not None:
            blocks = tuple(chain[group_of(self.config.min_tokens) : group_of(length)])
            # NOTE: the same holds for the writer's queue: a prefix at one of its ends queued
            # before it is not written (its file serves it)
            ends = state.known_ends if self.config.longer_serves_prefixes else ()
            covers = frozenset(prefix_key(chain, tokens, end) for end in ends if end < length)
            self.writer.enqueue(Write(group, length, key, state, blocks=blocks, covers=covers))
        self._publish_ram()

    def _refresh_prefixes(
        self, chain: list[str], tokens: list[int], length: int
    ) -> list[tuple[int, str]]:
        """The RAM states that are shorter prefixes of tokens[:length] (length, key), marked as
        used after it, the shortest last (ram_tier.py says why)."""
        lowest = group_of(self.config.min_tokens)
        found = [
            (stored, key)
            for k in range(group_of(length), lowest - 1, -1)
            for stored, key in sorted(self.ram.entries(chain[k]), reverse=True)
            if stored < length and key == prefix_key(chain, tokens, stored)
        ]
        if found:
            self.ram.touch([key for _, key in found])
        return found

    def _publish_ram(self) -> None:
        metrics.PREFIX_BYTES.labels("ram").set(self.ram.num_bytes)
        evicted, self._ram_evictions_seen = (
            self.ram.evictions - self._ram_evictions_seen,
            self.ram.evictions,
        )
        metrics.PREFIX_EVICTIONS.labels("ram").inc(evicted)

    def defer_writes_while(self, is_busy: Callable[[], bool]) -> None:
        """Disk and shared writes wait until `is_busy()` (the engine is computing) has been
        false for a while, up to max_write_delay."""
        if self.writer is not None:
            self.writer.is_busy = is_busy

    @property
    def queued_bytes(self) -> int:
        """Bytes of states waiting for the writer."""
        return self.writer.queued_bytes if self.writer is not None else 0

    def hurry_writes(self) -> None:
        """From now on snapshots are written as they come, not after the engine's quiet (the
        server stops: no request will meet the compression)."""
        if self.writer is not None:
            self.writer.hurry()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until queued snapshots are written (tests, shutdown)."""
        if self.writer is not None:
            self.writer.flush(timeout)

    def close(self, timeout: float = 30.0) -> None:
        if self.writer is not None:
            self.writer.close(timeout)
