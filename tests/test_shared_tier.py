"""The shared tier on a real redis-server, with synthetic states and a real Palimpsest (no
model): a replica finds what another wrote and keeps it locally; a corrupt, foreign or
half-evicted entry is a miss, counted by its reason; a server that goes away costs a bounded
wait and serving goes on; answers archived on one replica draft on another. (Entries written
by whoever does not hold the secret, or by a holder gone bad: test_hostile_tier.py.)"""

from __future__ import annotations

import hashlib
import random
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reame import metrics
from reame.cache.fingerprint import Fingerprint
from reame.cache.keys import group_chain, group_of, prefix_key
from reame.cache.prefix_cache import CacheConfig, PrefixCache
from reame.cache.shared_store import MAX_BRANCHES, SharedStore
from reame.cache.state_bound import StateBound
from reame.cache.tier_mac import TierMac
from reame.saved_state import SavedState
from reame.speculation.palimpsest import Palimpsest
from reame.speculation.palimpsest_records import encode_record
from reame.speculation.palimpsest_sync import PalimpsestSync
from reame.speculation.palimpsest_tier import sign_record
from redis_server import RedisServer

PARTS = {"model": "m1", "build": "b1", "backend": "avx512", "kv_layout": "kv f16/f16"}
MIN_TOKENS = 64
MAC = TierMac("the replicas' secret, 32 characters or more")
BOUND = StateBound(per_token=1024, fixed=0)  # the synthetic states' 200 kB fit from 64 tokens
VOCAB_SIZE = 50_000


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def url(server: RedisServer) -> str:
    server.client().flushall()
    return server.url


def fingerprint(**parts: str) -> Fingerprint:
    merged = {**PARTS, **parts}
    key = hashlib.blake2b(repr(sorted(merged.items())).encode(), digest_size=12).hexdigest()
    return Fingerprint(key, merged)


def store(url: str, timeout: float = 0.25) -> SharedStore:
    return SharedStore(url, "m1", timeout, MAC, BOUND)


def replica(url: str, tmp: Path, name: str, fp: Fingerprint | None = None, timeout=0.25):
    config = CacheConfig(directory=tmp / name, ram_bytes=64 << 20, disk_bytes=1 << 30,
                         min_tokens=MIN_TOKENS, write_quiet=0.0)  # fmt: skip
    return PrefixCache(config, fp or fingerprint(), store(url, timeout))


def state_of(tokens: list[int], num_bytes: int = 200_000) -> SavedState:
    seed = hashlib.blake2b(repr(tokens).encode(), digest_size=8).digest()
    return SavedState(tuple(tokens), random.Random(seed).randbytes(num_bytes))


def prompt(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(0, 50_000) for _ in range(n)]


def count(counter: object, label: str) -> float:
    return counter.labels(label)._value.get()  # type: ignore[attr-defined]


def blob_key(tokens: list[int], length: int) -> str:
    return f"reame:kv:m1:b:{prefix_key(group_chain(tokens), tokens, length)}"


def test_a_replica_restores_what_another_wrote_and_keeps_it_locally(url: str, tmp_path: Path):
    tokens = prompt(1, 1500)
    a, b = replica(url, tmp_path, "a"), replica(url, tmp_path, "b")
    written = count(metrics.PREFIX_WRITES, "shared"), count(metrics.PREFIX_WRITES, "disk")
    try:
        a.offer(state_of(tokens[:1400]))
        a.flush()
        # a's writes counted: the one its peer waits on in a cluster (test_cluster.py)
        assert count(metrics.PREFIX_WRITES, "shared") == written[0] + 1
        assert count(metrics.PREFIX_WRITES, "disk") == written[1] + 1
        shared_before = count(metrics.PREFIX_LOOKUPS, "shared")
        hit = b.lookup(tokens)
        assert hit is not None and hit.source == "shared"
        assert hit.state == state_of(tokens[:1400])  # the same tokens and bytes
        assert count(metrics.PREFIX_LOOKUPS, "shared") == shared_before + 1
        b.flush()
        # b kept it on its disk, and put nothing in the tier
        assert count(metrics.PREFIX_WRITES, "shared") == written[0] + 1
        assert count(metrics.PREFIX_WRITES, "disk") == written[1] + 2
        b.ram.clear()
        again = b.lookup(tokens)  # from b's own disk now, not the tier
        assert again is not None and again.source == "disk" and again.state == hit.state
    finally:
        a.close()
        b.close()


def test_a_longer_local_prefix_is_not_asked_for_and_a_longer_shared_one_wins(
    url: str, tmp_path: Path
):
    tokens = prompt(2, 1000)
    a, b = replica(url, tmp_path, "a"), replica(url, tmp_path, "b")
    try:
        a.offer(state_of(tokens[:900]))
        a.flush()
        b.offer(state_of(tokens[:200]))  # b holds a shorter one itself
        hit = b.lookup(tokens)
        assert hit is not None and hit.source == "shared" and len(hit.state.tokens) == 900
        b.offer(state_of(tokens))  # the whole prompt: the tier is not asked
        gets = metrics.SHARED_SECONDS.labels("lookup")._sum.get()  # type: ignore[attr-defined]
        hit = b.lookup(tokens)
        assert hit is not None and hit.source == "ram" and len(hit.state.tokens) == 1000
        assert metrics.SHARED_SECONDS.labels("lookup")._sum.get() == gets  # type: ignore
    finally:
        a.close()
        b.close()


def test_a_state_another_replica_wrote_serves_the_prefix_a_prompt_shares_with_it(
    url: str, server: RedisServer, tmp_path: Path
):
    # a's state: 900 tokens; b's prompt shares its first 700, then goes on otherwise
    tokens = prompt(3, 900)
    asked = [*tokens[:700], *prompt(4, 200)]
    a, b = replica(url, tmp_path, "a"), replica(url, tmp_path, "b")
    try:
        a.offer(state_of(tokens))
        a.flush()
        assert b.lookup(asked) is None  # no whole prefix of it anywhere
        [hit] = b.longer(asked, "", 0)
        assert (hit.source, hit.is_partial) == ("shared", True)
        assert hit.state == state_of(tokens) and hit.state.common_length(asked) == 700
        assert b.ram.contains(prefix_key(group_chain(tokens), tokens, 900))  # kept locally
        # a block listing names the newest states only, signed: a member written without the
        # secret is refused and removed
        block = group_chain(asked)[group_of(700)]
        listing = f"reame:kv:m1:p:{block}"
        server.client().zadd(listing, {b"0" * 32 + b"/900-" + b"f" * 32 + b"x" * 32: 1e12})
        refused = count(metrics.SHARED_REFUSED, "mac")
        assert b.longer(asked, "", 0) != []  # b's RAM (the forged entry is skipped)
        fresh = replica(url, tmp_path, "c")
        try:
            assert fresh.longer(asked, "", 0) != []
        finally:
            fresh.close()
        assert count(metrics.SHARED_REFUSED, "mac") >= refused + 1
        members = server.client().zrange(listing, 0, -1)
        assert members and all(not m.endswith(b"x" * 32) for m in members)
    finally:
        a.close()
        b.close()


def test_a_block_listing_keeps_the_newest_states_only(url: str, server: RedisServer, tmp_path):
    a = replica(url, tmp_path, "a")
    head = prompt(5, 128)
    try:
        for k in range(MAX_BRANCHES + 4):
            a.offer(state_of([*head, *prompt(100 + k, 64)], num_bytes=1000))
            a.flush()  # NOTE: the writer's queue would drop what does not fit
        listing = f"reame:kv:m1:p:{group_chain(head)[group_of(128)]}"
        assert server.client().zcard(listing) == MAX_BRANCHES
    finally:
        a.close()


def test_a_corrupt_entry_is_refused_and_removed(url: str, server: RedisServer, tmp_path: Path):
    tokens = prompt(3, 600)
    a, b = replica(url, tmp_path, "a"), replica(url, tmp_path, "b")
    try:
        a.offer(state_of(tokens[:512]))
        a.flush()
        client, key = server.client(), blob_key(tokens, 512)
        data = bytearray(MAC.opened(client.get(key), key.encode(), b"m1"))
        data[-100] ^= 0xFF  # one bit pattern in the compressed state, signed by a replica
        client.set(key, MAC.signed(bytes(data), key.encode(), b"m1"))
        refused = count(metrics.PREFIX_REJECTED, "corrupt")
        assert b.lookup(tokens) is None
        assert count(metrics.PREFIX_REJECTED, "corrupt") == refused + 1
        assert client.get(key) is None  # no one else meets it
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("part", ["build", "backend", "kv_layout"])
def test_a_foreign_entry_is_a_miss_counted_by_what_differs(url: str, server: RedisServer,
                                                            tmp_path: Path, part: str):  # fmt: skip
    tokens = prompt(4, 600)
    arm = replica(url, tmp_path, "arm", fingerprint(**{part: "other"}))
    x86 = replica(url, tmp_path, "x86")
    try:
        arm.offer(state_of(tokens[:512]))
        arm.flush()
        refused = count(metrics.PREFIX_REJECTED, part)
        assert x86.lookup(tokens) is None
        assert count(metrics.PREFIX_REJECTED, part) == refused + 1
        read = count(metrics.SHARED_BYTES, "read")
        assert x86.lookup(tokens) is None
        assert count(metrics.SHARED_BYTES, "read") == read  # refused once, not fetched again
        x86.offer(state_of(tokens[:512]))
        x86.flush()  # NX: the first writer's entry stays, so the two kinds do not fight
        assert server.client().get(blob_key(tokens, 512)) is not None
        hit = arm.lookup(tokens)
        assert hit is not None and hit.source == "ram"
    finally:
        arm.close()
        x86.close()


def test_a_listed_entry_whose_blob_was_evicted_is_a_miss_and_is_cleaned_up(
    url: str, server: RedisServer, tmp_path: Path
):
    tokens = prompt(5, 600)
    a, b = replica(url, tmp_path, "a"), replica(url, tmp_path, "b")
    try:
        a.offer(state_of(tokens[:512]))
        a.flush()
        client = server.client()
        client.delete(blob_key(tokens, 512))
        group = f"reame:kv:m1:g:{group_chain(tokens)[group_of(512)]}"
        assert client.hlen(group) == 1
        missing = count(metrics.PREFIX_REJECTED, "missing")
        assert b.lookup(tokens) is None
        assert count(metrics.PREFIX_REJECTED, "missing") == missing + 1
        assert client.hlen(group) == 0
    finally:
        a.close()
        b.close()


def test_an_lru_server_full_of_states_still_answers_and_only_misses(tmp_path: Path):
    small = RedisServer(maxmemory="4mb")
    a, b = replica(small.url, tmp_path, "a"), replica(small.url, tmp_path, "b")
    try:
        prompts = [prompt(100 + k, 300) for k in range(40)]  # 40 x 200 kB in 4 MB
        for p in prompts:
            a.offer(state_of(p))
        a.flush()
        found = [b.lookup(p) for p in prompts]
        hits = [h for h in found if h is not None]
        assert 0 < len(hits) < len(prompts)
        assert all(
            h.state == state_of(p) for h, p in zip(found, prompts, strict=True) if h is not None
        )
    finally:
        a.close()
        b.close()
        small.stop()


def test_a_tier_that_goes_away_costs_a_bounded_wait_and_local_tiers_serve(tmp_path: Path):
    down = RedisServer()
    tokens = prompt(6, 600)
    a = replica(down.url, tmp_path, "a")
    try:
        a.offer(state_of(tokens[:256]))
        a.flush()
        down.stop()
        errors = sum(count(metrics.SHARED_ERRORS, r) for r in ("connection", "timeout"))
        start = time.monotonic()
        hit = a.lookup(tokens)  # asks the tier for longer ones: refused at once
        assert hit is not None and hit.source == "ram" and len(hit.state.tokens) == 256
        assert time.monotonic() - start < 1.0
        assert sum(count(metrics.SHARED_ERRORS, r) for r in ("connection", "timeout")) > errors
        skipped = count(metrics.SHARED_ERRORS, "skipped")
        written = count(metrics.PREFIX_WRITES, "shared"), count(metrics.PREFIX_WRITES, "disk")
        a.offer(state_of(tokens[:512]))  # the writer goes on to disk
        a.flush()
        assert count(metrics.PREFIX_WRITES, "shared") == written[0]  # not counted as written
        assert count(metrics.PREFIX_WRITES, "disk") == written[1] + 1
        assert a.lookup(prompt(7, 300)) is None
        assert count(metrics.SHARED_ERRORS, "skipped") > skipped  # not asked again for a while
        a.ram.clear()
        hit = a.lookup(tokens)
        assert hit is not None and hit.source == "disk" and len(hit.state.tokens) == 512
    finally:
        a.close()


def test_a_server_that_does_not_answer_costs_the_timeout(tmp_path: Path):
    import socket

    with socket.socket() as silent:  # accepts connections, never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        a = replica(url, tmp_path, "a", timeout=0.2)
        try:
            start = time.monotonic()
            assert a.lookup(prompt(8, 300)) is None
            waited = time.monotonic() - start
            assert 0.15 < waited < 1.0
            start = time.monotonic()
            assert a.lookup(prompt(9, 300)) is None  # skipped: no second wait
            assert time.monotonic() - start < 0.1
        finally:
            a.close()


def test_answers_archived_on_one_replica_draft_on_another(url: str, tmp_path: Path):
    vocab = "vocab-test"
    story = prompt(10, 300)
    one = Palimpsest(tmp_path / "one", vocab, 1 << 20, segment_bytes=1500)
    two = Palimpsest(tmp_path / "two", vocab, 1 << 20)
    sync_one = PalimpsestSync(one, store(url), vocab, VOCAB_SIZE, interval=3600)
    sync_two = PalimpsestSync(two, store(url), vocab, VOCAB_SIZE, interval=3600)
    assert two.propose(story[:40], 8) == []
    for k in range(0, 300, 100):  # three records, the segment sealed after the first ones
        one.add(story[k : k + 100])
    sync_one.sync()
    imported = metrics.PALIMPSEST_IMPORTED._value.get()  # type: ignore[attr-defined]
    assert sync_two.sync() == 3
    assert metrics.PALIMPSEST_IMPORTED._value.get() == imported + 3  # type: ignore
    two.wait_for_index()
    assert two.propose(story[120:140], 8) == story[140:148]
    assert sync_two.sync() == 0  # nothing new: nothing imported twice
    one.add(story[:90])
    sync_one.sync()
    assert sync_two.sync() == 1  # the open segment read on from where it was read


def test_a_peer_segment_that_does_not_check_out_is_set_aside(
    url: str, server: RedisServer, tmp_path: Path
):
    vocab, client = "vocab-bad", server.client()
    listing, key = f"reame:pal:{vocab}:segments", f"reame:pal:{vocab}:s:x.pal"
    client.hset(listing, "x.pal", MAC.signed(b"open", listing.encode(), b"x.pal"))
    good = sign_record(MAC, key, vocab, encode_record(prompt(11, 40)))
    bad_crc = sign_record(MAC, key, vocab, struct.pack("<4sII", b"PALR", 2, 12345) + bytes(8))
    client.set(key, good + bad_crc)  # signed, yet a record that does not parse
    two = Palimpsest(tmp_path / "two", vocab, 1 << 20)
    sync = PalimpsestSync(two, store(url), vocab, VOCAB_SIZE, interval=3600)
    refused = count(metrics.SHARED_REFUSED, "record")
    assert sync.sync() == 0
    assert two.num_set_aside == 1 and two.num_tokens == 0
    assert count(metrics.SHARED_REFUSED, "record") == refused + 1
    assert sync.sync() == 0 and two.num_set_aside == 1  # not read again
