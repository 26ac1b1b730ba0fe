"""The shared tier: snapshots and Palimpsest segments in one Valkey or Redis server, for replicas
on several machines. NOTE: the only module that imports redis.

    reame:kv:<model>:g:<group>    hash: "<length>-<key>" -> tag
    reame:kv:<model>:b:<key>      string: tag | the snapshot exactly as on disk (snapshot_format)
    reame:kv:<model>:p:<group>    sorted set, newest first: "<group>/<length>-<key>" | tag of
                                  the MAX_BRANCHES states last written that go on past this
                                  block (found by the longest common prefix)
    reame:ans:<model>:<key>       string: tag | a remembered answer's record, as on disk
                                  (api/answer_memory.py)
    reame:pal:<vocab>:segments    hash: segment name -> tag | "open" or "sealed:<bytes>"
    reame:pal:<vocab>:s:<name>    string: the segment's records, each tag | record
                                  (speculation/palimpsest_tier.py)

`model` is the model file's fingerprint (replicas of other models never meet), `vocab` the
tokenizer's (token ids mean the same text under it). Everything else a state depends on
(llama.cpp build, CPU backend, KV layout) is in each blob's header and checked when it is read,
so a foreign entry is a miss counted by its reason, never a state. Blobs are written with NX
(the first writer's stays; a foreign replica cannot replace it).

The server is not trusted: whoever can write to it could otherwise choose what every replica
restores. Each entry is signed (tier_mac.py) over its key name and content, and its tag checked
before anything else is read of it; listings are parsed strictly (tier_listing.py); no read is
larger than its entry can rightly be (a blob: the snapshot of its tokens' state, state_bound.py; a
listing: MAX_LISTED fields of MAX_FIELD_BYTES, filtered on the server by LISTING_SCRIPT, a block
listing MAX_BRANCHES members by BRANCH_SCRIPT; a segment: MAX_TAIL_BYTES a sync, all of them
MAX_SYNC_BYTES). An entry that does not check out is a miss counted by its reason
(reame_shared_store_refused_total) and removed, with the listing entry that led to it.

The server may evict any key on its own (`maxmemory-policy allkeys-lru`): a group listing a
blob that is gone is a miss, and the listing is cleaned up. Every call waits at most `timeout`
seconds; after a failure the tier is skipped for RETRY_SECONDS, so a server that is down costs
one bounded wait, not one per request. Nothing here raises: a failure is counted and reads as
empty.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from reame import metrics
from reame.cache.state_bound import StateBound
from reame.cache.tier_listing import (
    branch_entry,
    branch_field,
    prefix_entry,
    prefix_field,
    segment_name,
    segment_status,
    tail_sizes,
)
from reame.cache.tier_mac import TAG_BYTES, TierMac
from reame.cache.tier_scripts import BRANCH_SCRIPT, LISTING_SCRIPT

RETRY_SECONDS = 5.0
MAX_LISTED = 4096  # fields of one listing; a group or segment list past it is refused whole
MAX_FIELD_BYTES = 256  # a field or value of a listing (replicas write under 100)
MAX_BRANCHES = 16  # states a block listing names: the newest; older ones are dropped on write
T = TypeVar("T")
_NOT_A_STRING = b"\0"  # a blob key of another type: read as a value that is not signed


class SharedStore:
    def __init__(
        self,
        url: str,
        model: str,
        timeout: float,
        mac: TierMac,
        bound: StateBound,
        password: str | None = None,
    ) -> None:
        self.url, self.timeout, self.mac, self.bound = url, timeout, mac, bound
        self._model = model.encode()
        self._kv, self._answers = f"reame:kv:{model}", f"reame:ans:{model}"
        self._client = redis.Redis.from_url(
            url,
            password=password,  # NOTE: a password in the URL wins; it belongs here, not there
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self._listing = self._client.register_script(LISTING_SCRIPT)
        self._branch_listing = self._client.register_script(BRANCH_SCRIPT)
        self._down_until = 0.0  # NOTE: one float, set whole: no lock between threads

    # -- snapshots ---------------------------------------------------------------------------

    def entries(self, groups: Sequence[str]) -> list[list[tuple[int, str]]]:
        """(length, key) of each group's prefixes whose listing entry checks out, every group
        in one round trip."""
        names = [f"{self._kv}:g:{group}" for group in groups]
        listed = self._call("lookup", lambda _: self._listings(names), None)
        out: list[list[tuple[int, str]]] = [[] for _ in groups]
        if listed is None:
            return out
        refused: list[tuple[str, bytes]] = []
        for found, name, fields in zip(out, names, listed, strict=True):
            for field, tag in fields.items():
                entry = self._prefix_entry(name, field, tag)
                if entry is None:
                    refused.append((name, field))
                else:
                    found.append(entry)
        self._remove("put", fields=refused)
        return out

    def _prefix_entry(self, listing: str, field: bytes, tag: bytes) -> tuple[int, str] | None:
        if not self.mac.verify(tag, listing.encode(), field):
            return _refuse("mac")
        return prefix_entry(field) or _refuse("listing")

    def get(self, group: str, length: int, key: str) -> bytes | None:
        """The snapshot of the `length` tokens named `key`, its tag checked; None if the tier
        did not answer, the blob is gone (its listing is cleaned up) or it does not check out
        (it is removed, with its listing entry)."""
        blob, listing = f"{self._kv}:b:{key}", f"{self._kv}:g:{group}"
        field = prefix_field(length, key)
        most = TAG_BYTES + self.bound.blob_bytes(length)
        data = self._read_bounded(blob, most)
        if data is None:
            return None
        if not data:  # listed, but the server evicted the blob: clean the listing
            metrics.PREFIX_REJECTED.labels("missing").inc()
            self._remove("put", fields=[(listing, field)])
            return None
        snapshot = self.mac.opened(data, blob.encode(), self._model) if len(data) <= most else None
        if snapshot is None:
            _refuse("size" if len(data) > most else "mac")
            self._remove("put", fields=[(listing, field)], keys=[blob])
        return snapshot

    def _read_bounded(self, name: str, most: int) -> bytes | None:
        """A string value up to one byte past `most`; None: no answer, b"": there is none."""

        def run(client: redis.Redis) -> bytes:
            try:  # NOTE: one byte past the bound says the value is longer: it is not read
                return bytes(client.getrange(name, 0, most))
            except redis.exceptions.ResponseError:
                return _NOT_A_STRING

        data = self._call("get", run, None)
        if data:
            metrics.SHARED_BYTES.labels("read").inc(len(data))
        return data

    def branches(self, blocks: Sequence[str]) -> list[list[tuple[str, int, str]]]:
        """(group, length, key) of the states listed as going on past each block group, newest
        first, whose entries check out; every block in one round trip."""
        names = [f"{self._kv}:p:{block}" for block in blocks]
        out: list[list[tuple[str, int, str]]] = [[] for _ in blocks]

        def run(client: redis.Redis) -> list[object]:
            return self._branch_listing(keys=names, args=[MAX_BRANCHES, MAX_FIELD_BYTES])

        replies = self._call("lookup", run, None) if blocks else []
        refused: list[tuple[str, bytes]] = []
        for found, name, members in zip(out, names, replies or [], strict=False):
            if not isinstance(members, list):
                _refuse("size")
                refused.append((name, b""))
                continue
            for member in members:
                field, tag = member[:-TAG_BYTES], member[-TAG_BYTES:]
                if not self.mac.verify(tag, name.encode(), field):
                    entry = _refuse("mac")
                else:
                    entry = branch_entry(field) or _refuse("listing")
                if entry is None:
                    refused.append((name, member))
                else:
                    found.append(entry)
        self._remove_branches(refused)
        return out

    def put(
        self, group: str, length: int, key: str, data: bytes, blocks: Sequence[str] = ()
    ) -> bool:
        """The blob first, then its listing (a reader never finds a listed blob that was not
        written, only one evicted since, which reads as a miss), then in each of `blocks` (the
        block groups it goes on past) as the newest, each kept to MAX_BRANCHES. False if the
        tier did not take it."""
        blob, listing = f"{self._kv}:b:{key}", f"{self._kv}:g:{group}"
        field = prefix_field(length, key)
        signed = self.mac.signed(data, blob.encode(), self._model)
        now = time.time()

        def run(client: redis.Redis) -> bool:
            pipe = client.pipeline(transaction=False)
            pipe.set(blob, signed, nx=True)
            pipe.hset(listing, field, self.mac.sign(listing.encode(), field))
            branch = branch_field(group, length, key)
            for block in blocks:
                name = f"{self._kv}:p:{block}"
                pipe.zadd(name, {branch + self.mac.sign(name.encode(), branch): now})
                pipe.zremrangebyrank(name, 0, -MAX_BRANCHES - 1)
            pipe.execute()
            metrics.SHARED_BYTES.labels("written").inc(len(signed))
            return True

        return self._call("put", run, False)

    def forget(self, group: str, length: int, key: str) -> None:
        """Drop a blob that does not hold what its key names, and its listing entry."""
        listing = f"{self._kv}:g:{group}"
        field, blob = prefix_field(length, key), f"{self._kv}:b:{key}"
        self._remove("put", fields=[(listing, field)], keys=[blob])

    # -- remembered answers ------------------------------------------------------------------

    def answer(self, key: str, most: int) -> bytes | None:
        """The record of the answer named `key`, its tag checked; None if the tier did not
        answer, has none, or it is larger than `most` or does not check out (then removed)."""
        name = f"{self._answers}:{key}"
        data = self._read_bounded(name, TAG_BYTES + most)
        if not data:
            return None
        fits = len(data) <= TAG_BYTES + most
        record = self.mac.opened(data, name.encode(), self._model) if fits else None
        if record is None:
            _refuse("mac" if fits else "size")
            self._remove("put", keys=[name])
        return record

    def keep_answer(self, key: str, record: bytes, ttl_seconds: int) -> None:
        """Offer an answer's record (the first writer's stays), for `ttl_seconds`."""
        name = f"{self._answers}:{key}"
        signed = self.mac.signed(record, name.encode(), self._model)

        def run(client: redis.Redis) -> None:
            client.set(name, signed, nx=True, ex=ttl_seconds)
            metrics.SHARED_BYTES.labels("written").inc(len(signed))

        self._call("put", run, None)

    # -- Palimpsest segments -----------------------------------------------------------------

    def segment_key(self, vocab: str, name: str) -> str:
        """What a segment's records are signed over (palimpsest_tier.py)."""
        return f"reame:pal:{vocab}:s:{name}"

    def segments(self, vocab: str) -> dict[str, str] | None:
        """Segment name -> "open" or "sealed:<bytes>", of the entries that check out; None if
        the tier did not answer (so a reader does not take a failure for "every segment was
        removed")."""
        listing = f"reame:pal:{vocab}:segments"
        listed = self._call("palimpsest", lambda _: self._listings([listing]), None)
        if listed is None:
            return None
        out, refused = {}, []
        for name, value in listed[0].items():
            entry = self._segment_entry(listing, name, value)
            if entry is None:
                refused.append(name)
            else:
                out[entry[0]] = entry[1]
        self._remove(
            "palimpsest",
            fields=[(listing, name) for name in refused],
            keys=[self.segment_key(vocab, name.decode(errors="replace")) for name in refused],
        )
        return out

    def _segment_entry(self, listing: str, name: bytes, value: bytes) -> tuple[str, str] | None:
        status = self.mac.opened(value, listing.encode(), name)
        if status is None:
            return _refuse("mac")
        parsed, state = segment_name(name), segment_status(status)
        return (parsed, state) if parsed is not None and state is not None else _refuse("listing")

    def tails(self, vocab: str, reads: Sequence[tuple[str, int]]) -> list[bytes] | None:
        """Each segment's bytes from an offset on, as much as tail_sizes allows, in two round trips
        (the sizes, then the bytes); empty for a key that is not a string."""
        keys = [self.segment_key(vocab, name) for name, _ in reads]

        def run(client: redis.Redis) -> list[bytes]:
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.strlen(key)
            sizes = tail_sizes([o for _, o in reads], pipe.execute(raise_on_error=False))
            pipe = client.pipeline(transaction=False)
            for key, (_, offset), size in zip(keys, reads, sizes, strict=True):
                if size:
                    pipe.getrange(key, offset, offset + size - 1)
            replies = iter(pipe.execute(raise_on_error=False))
            out = [next(replies) if size else b"" for size in sizes]
            out = [d if isinstance(d, bytes) else b"" for d in out]
            metrics.SHARED_BYTES.labels("read").inc(sum(map(len, out)))
            return out

        return self._call("palimpsest", run, None) if reads else []

    def append(
        self, vocab: str, records: Sequence[tuple[str, bytes]], sealed: dict[str, str]
    ) -> bool:
        """Signed records appended to their segments, and segments' statuses set (signed
        here), in one round trip."""
        listing = f"reame:pal:{vocab}:segments"

        def status(name: str, value: str) -> bytes:
            return self.mac.signed(value.encode(), listing.encode(), name.encode())

        def run(client: redis.Redis) -> bool:
            pipe = client.pipeline(transaction=False)
            for name, data in records:
                pipe.append(self.segment_key(vocab, name), data)
                pipe.hsetnx(listing, name, status(name, "open"))
            for name, value in sealed.items():
                pipe.hset(listing, name, status(name, value))
            pipe.execute()
            metrics.SHARED_BYTES.labels("written").inc(sum(len(d) for _, d in records))
            return True

        return self._call("palimpsest", run, False)

    def remove_segments(self, vocab: str, names: Sequence[str]) -> None:
        listing = f"reame:pal:{vocab}:segments"
        self._remove(
            "palimpsest",
            fields=[(listing, name.encode()) for name in names],
            keys=[self.segment_key(vocab, name) for name in names],
        )

    # -- every call --------------------------------------------------------------------------

    def _listings(self, names: list[str]) -> list[dict[bytes, bytes]]:
        """Each listing's fields; a listing past the bounds is refused and removed."""
        replies = self._listing(keys=names, args=[MAX_LISTED, MAX_FIELD_BYTES])
        out: list[dict[bytes, bytes]] = []
        for name, flat in zip(names, replies, strict=True):
            if not isinstance(flat, list):
                _refuse("size")
                self._client.delete(name)
                flat = []
            out.append(dict(zip(flat[::2], flat[1::2], strict=True)))
        return out

    def _remove(
        self, op: str, fields: Sequence[tuple[str, bytes]] = (), keys: Sequence[str] = ()
    ) -> None:
        def run(client: redis.Redis) -> None:
            pipe = client.pipeline(transaction=False)
            for listing, field in fields:
                pipe.hdel(listing, field)
            for key in keys:
                pipe.delete(key)
            pipe.execute()

        if fields or keys:
            self._call(op, run, None)

    def _remove_branches(self, members: Sequence[tuple[str, bytes]]) -> None:
        """Members that do not check out (an empty one: the whole key, of another kind)."""

        def run(client: redis.Redis) -> None:
            pipe = client.pipeline(transaction=False)
            for name, member in members:
                pipe.zrem(name, member) if member else pipe.delete(name)
            pipe.execute()

        if members:
            self._call("put", run, None)

    @property
    def is_down(self) -> bool:
        return time.monotonic() < self._down_until

    def _call(self, op: str, run: Callable[[redis.Redis], T], failed: T) -> T:
        if self.is_down:
            metrics.SHARED_ERRORS.labels("skipped").inc()
            return failed
        start = time.perf_counter()
        try:
            out = run(self._client)
        except redis.exceptions.TimeoutError:
            return self._failed("timeout", failed)
        except redis.exceptions.ConnectionError:
            return self._failed("connection", failed)
        except redis.exceptions.RedisError:
            return self._failed("response", failed)
        metrics.SHARED_SECONDS.labels(op).observe(time.perf_counter() - start)
        return out

    def _failed(self, reason: str, failed: T) -> T:
        metrics.SHARED_ERRORS.labels(reason).inc()
        self._down_until = time.monotonic() + RETRY_SECONDS
        return failed

    def close(self) -> None:
        self._client.close()


def _refuse(reason: str) -> None:
    """Counts an entry refused; None, what the entry reads as."""
    metrics.SHARED_REFUSED.labels(reason).inc()
