"""The shared tier: snapshots and Palimpsest segments in one Valkey or Redis server, for replicas
on several machines. NOTE: the only module that imports redis.

    reame:kv:<model>:g:<group>    hash: "<length>-<key>" -> stored bytes, a prefix of the group
    reame:kv:<model>:b:<key>      string: the snapshot exactly as on disk (snapshot_format)
    reame:pal:<vocab>:segments    hash: segment name -> "open" or "sealed:<bytes>"
    reame:pal:<vocab>:s:<name>    string: the segment's records, appended as on disk

`model` is the model file's fingerprint (replicas of other models never meet), `vocab` the
tokenizer's (token ids mean the same text under it). Everything else a state depends on
(llama.cpp build, CPU backend, KV layout) is in each blob's header and checked when it is read,
so a foreign entry is a miss counted by its reason, never a state. Blobs are written with NX
(the first writer's stays; a foreign replica cannot replace it).

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

RETRY_SECONDS = 5.0
T = TypeVar("T")


class SharedStore:
    def __init__(self, url: str, model: str, timeout: float) -> None:
        self.url, self.timeout = url, timeout
        self._kv = f"reame:kv:{model}"
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self._down_until = 0.0  # NOTE: one float, set whole: no lock between threads

    # -- snapshots ---------------------------------------------------------------------------

    def entries(self, groups: Sequence[str]) -> list[list[tuple[int, str]]]:
        """(length, key) of each group's prefixes, every group in one round trip."""

        def run(client: redis.Redis) -> list[list[tuple[int, str]]]:
            pipe = client.pipeline(transaction=False)
            for group in groups:
                pipe.hkeys(f"{self._kv}:g:{group}")
            return [[p for p in map(_entry, names) if p is not None] for names in pipe.execute()]

        return self._call("lookup", run, [[] for _ in groups])

    def get(self, key: str) -> bytes | None:
        def run(client: redis.Redis) -> bytes | None:
            data = client.get(f"{self._kv}:b:{key}")
            if data is not None:
                metrics.SHARED_BYTES.labels("read").inc(len(data))
            return data

        return self._call("get", run, None)

    def put(self, group: str, length: int, key: str, data: bytes) -> None:
        """The blob first, then its listing: a reader never finds a listed blob that was not
        written (only one evicted since, which reads as a miss)."""

        def run(client: redis.Redis) -> None:
            pipe = client.pipeline(transaction=False)
            pipe.set(f"{self._kv}:b:{key}", data, nx=True)
            pipe.hset(f"{self._kv}:g:{group}", f"{length}-{key}", len(data))
            pipe.execute()
            metrics.SHARED_BYTES.labels("written").inc(len(data))

        self._call("put", run, None)

    def forget(self, group: str, length: int, key: str, blob_too: bool = False) -> None:
        """Drop a listing whose blob is gone (and, for a corrupt blob, the blob)."""

        def run(client: redis.Redis) -> None:
            pipe = client.pipeline(transaction=False)
            pipe.hdel(f"{self._kv}:g:{group}", f"{length}-{key}")
            if blob_too:
                pipe.delete(f"{self._kv}:b:{key}")
            pipe.execute()

        self._call("put", run, None)

    # -- Palimpsest segments -----------------------------------------------------------------

    def segments(self, vocab: str) -> dict[str, str] | None:
        """Segment name -> "open" or "sealed:<bytes>"; None if the tier did not answer (so a
        reader does not take a failure for "every segment was removed")."""

        def run(client: redis.Redis) -> dict[str, str]:
            raw = client.hgetall(f"reame:pal:{vocab}:segments")
            return {k.decode(): v.decode() for k, v in raw.items()}

        return self._call("palimpsest", run, None)

    def tails(self, vocab: str, reads: Sequence[tuple[str, int]]) -> list[bytes] | None:
        """Each segment's bytes from an offset on, in one round trip."""

        def run(client: redis.Redis) -> list[bytes]:
            pipe = client.pipeline(transaction=False)
            for name, offset in reads:
                pipe.getrange(f"reame:pal:{vocab}:s:{name}", offset, -1)
            out = [bytes(d or b"") for d in pipe.execute()]
            metrics.SHARED_BYTES.labels("read").inc(sum(map(len, out)))
            return out

        return self._call("palimpsest", run, None) if reads else []

    def append(
        self, vocab: str, records: Sequence[tuple[str, bytes]], sealed: dict[str, str]
    ) -> bool:
        """Records appended to their segments, and segments' statuses set, in one round trip."""

        def run(client: redis.Redis) -> bool:
            pipe = client.pipeline(transaction=False)
            listing = f"reame:pal:{vocab}:segments"
            for name, data in records:
                pipe.append(f"reame:pal:{vocab}:s:{name}", data)
                pipe.hsetnx(listing, name, "open")
            for name, status in sealed.items():
                pipe.hset(listing, name, status)
            pipe.execute()
            metrics.SHARED_BYTES.labels("written").inc(sum(len(d) for _, d in records))
            return True

        return self._call("palimpsest", run, False)

    def remove_segments(self, vocab: str, names: Sequence[str]) -> None:
        def run(client: redis.Redis) -> None:
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.delete(f"reame:pal:{vocab}:s:{name}")
                pipe.hdel(f"reame:pal:{vocab}:segments", name)
            pipe.execute()

        if names:
            self._call("palimpsest", run, None)

    # -- every call --------------------------------------------------------------------------

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


def _entry(name: bytes) -> tuple[int, str] | None:
    length, _, key = name.decode(errors="replace").partition("-")
    return (int(length), key) if length.isdigit() and key else None
