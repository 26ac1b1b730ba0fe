"""The shared tier written by whoever can reach the server: without the secret, with another
replica's secret, or by a holder of the secret gone bad. First the parts alone, with no server
and no model (signatures, strict listings, snapshot headers, Palimpsest records); then the store
on a real redis-server (keys of another type, listings and blobs past their bounds, a sync's
reads bounded); then for real, with the model: a replica writes, every entry of a
password-protected redis-server is replaced (junk, a truncated copy, another key's valid value,
a zstd frame that claims 4 GiB, listings of garbage, Palimpsest records of token ids the model
does not have), each both unsigned and signed with the secret, and a replica that never saw the
prompts answers each one 200 and as a cold request does, its memory bounded, every bad entry
counted, while an intact entry is still restored."""

from __future__ import annotations

import hashlib
import json
import random
import resource
import secrets
import struct
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis
import zstandard

from reame import metrics
from reame.cache import tier_listing
from reame.cache.keys import group_chain, group_of
from reame.cache.shared_store import SharedStore
from reame.cache.snapshot_format import MAGIC, SnapshotError, decode, encode, read_header
from reame.cache.state_bound import StateBound
from reame.cache.tier_listing import prefix_entry, segment_name, segment_status
from reame.cache.tier_mac import TAG_BYTES, TierMac
from reame.saved_state import SavedState
from reame.speculation.palimpsest import Palimpsest
from reame.speculation.palimpsest_records import encode_record
from reame.speculation.palimpsest_sync import PalimpsestSync
from reame.speculation.palimpsest_tier import RefusedSegment, read_signed, sign_record
from reame_bench.workloads import filler_text
from redis_server import RedisServer
from server_process import ServerProcess

SECRET, OTHER_SECRET = secrets.token_hex(32), secrets.token_hex(32)
PASSWORD = secrets.token_hex(16)
MAC = TierMac(SECRET)
KEY = "0123456789abcdef0123456789abcdef"
BOMB_BYTES = 4 << 30


@pytest.fixture(scope="module")
def bomb_frame() -> bytes:
    """A zstd frame of 4 GiB of zeros: about 130 kB."""
    compressor = zstandard.ZstdCompressor(level=1, write_checksum=True).compressobj(BOMB_BYTES)
    zeros = bytes(1 << 20)
    return b"".join([*(compressor.compress(zeros) for _ in range(BOMB_BYTES >> 20)),
                     compressor.flush()])  # fmt: skip


def token_span(snapshot: bytes) -> slice:
    """Where a snapshot's token ids are."""
    start = len(MAGIC) + 4 + int.from_bytes(snapshot[len(MAGIC) : len(MAGIC) + 4], "little")
    return slice(start, start + 4 * read_header(snapshot)["num_tokens"])


def reheader(snapshot: bytes, header: bytes, frame: bytes | None = None) -> bytes:
    """A snapshot with another header (and state frame), its checksum made right: what whoever
    knows the format can write."""
    span = token_span(snapshot)
    tokens = snapshot[span]
    if frame is None:
        frame = snapshot[span.stop + 16 :]
    head = MAGIC + len(header).to_bytes(4, "little") + header + tokens
    return head + hashlib.blake2b(head, digest_size=16).digest() + frame


def bomb(snapshot: bytes, frame: bytes) -> bytes:
    fields = {**read_header(snapshot), "state_bytes": BOMB_BYTES, "compressed_bytes": len(frame)}
    return reheader(snapshot, json.dumps(fields).encode(), frame)


# -- the parts alone ---------------------------------------------------------------------------


def test_a_signature_binds_the_key_name_and_the_content_and_only_known_secrets_check_out():
    value = MAC.signed(b"payload", b"reame:kv:m:b:one", b"m")
    assert MAC.opened(value, b"reame:kv:m:b:one", b"m") == b"payload"
    assert MAC.opened(value, b"reame:kv:m:b:two", b"m") is None  # moved under another key
    assert MAC.opened(value[:-1] + b"X", b"reame:kv:m:b:one", b"m") is None
    assert MAC.opened(value[:TAG_BYTES - 1], b"reame:kv:m:b:one", b"m") is None  # fmt: skip
    assert TierMac(OTHER_SECRET).opened(value, b"reame:kv:m:b:one", b"m") is None
    assert MAC.sign(b"ab", b"c") != MAC.sign(b"a", b"bc")  # fields cannot slide into each other
    rotated = TierMac(OTHER_SECRET, [SECRET])  # reads both, writes with the new one only
    assert rotated.opened(value, b"reame:kv:m:b:one", b"m") == b"payload"
    assert MAC.opened(rotated.signed(b"p", b"k"), b"k") is None


@pytest.mark.parametrize(
    "field",
    ["²-" + KEY, "٣-" + KEY, "99999999999999999999-" + KEY, "-5-" + KEY, "0-" + KEY,
     " 12-" + KEY, "12-" + KEY.upper(), "12-" + KEY + "0", "12-", "12", "", "1_0-" + KEY],
)  # fmt: skip
def test_a_listing_field_no_replica_writes_is_none_never_an_exception(field: str):
    assert prefix_entry(field.encode()) is None


@pytest.mark.parametrize(
    "status", ["sealed:²", "sealed:99999999999999999999", "sealed:-1", "sealed: 1", "open ",
               "sealed:", "closed", "sealed:1.5"],
)  # fmt: skip
def test_a_segment_status_no_replica_writes_is_none(status: str):
    assert segment_status(status.encode()) is None


def test_what_replicas_write_parses():
    assert prefix_entry(f"512-{KEY}".encode()) == (512, KEY)
    assert segment_status(b"sealed:4194304") == "sealed:4194304" and segment_status(b"open")
    assert segment_name(b"00000001733385600000-4242-0a1b2c3d.pal")
    assert segment_name(b"../x") is None and segment_name(b"x" * 101) is None


def snapshot(num_tokens: int = 80) -> bytes:
    return encode(SavedState(tuple(range(num_tokens)), random.randbytes(4000)), "fp")


@pytest.mark.parametrize(
    "header",
    [b'{"version":1,"fingerprint":"fp","num_tokens":1e400,"state_bytes":4000,'
     b'"compressed_bytes":4000}',
     b'{"version":1,"fingerprint":"fp","num_tokens":80,"state_bytes":1e400,'
     b'"compressed_bytes":1e400}',
     b"[" * 100_000 + b"]" * 100_000],
    ids=["tokens-overflow", "sizes-overflow", "deep"],
)  # fmt: skip
def test_a_header_whose_numbers_overflow_or_nest_is_refused_not_raised(header: bytes):
    with pytest.raises(SnapshotError):
        decode(reheader(snapshot(), header), "fp")


def test_a_frame_that_claims_gigabytes_is_refused_before_it_is_decompressed(bomb_frame: bytes):
    data = bomb(snapshot(), bomb_frame)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(SnapshotError, match="more than its tokens take"):
        decode(data, "fp", max_state_bytes=1 << 20)
    assert time.monotonic() - start < 0.5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 100_000  # kB


SEGMENT = "reame:pal:vocab-v:s:seg.pal"


def signed_records(*records: list[int], mac: TierMac = MAC, key: str = SEGMENT) -> bytes:
    return b"".join(sign_record(mac, key, "vocab-v", encode_record(r)) for r in records)


def test_signed_records_read_back_and_a_short_tail_waits():
    data = signed_records([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11])
    records, consumed = read_signed(data + data[:20], MAC, SEGMENT, "vocab-v", 100)
    assert [r.tolist() for r in records] == [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11]]
    assert consumed == len(data)


@pytest.mark.parametrize(
    ("data", "reason"),
    [(signed_records([1, 2, 3, 4, 5, 1 << 30]), "token"),
     (signed_records([1, 2, 3, 4, 5, -1]), "token"),
     (bytes(TAG_BYTES) + encode_record([1, 2, 3, 4, 5]), "mac"),
     (signed_records([1, 2, 3, 4, 5], key="reame:pal:vocab-v:s:other.pal"), "mac"),
     (signed_records([1, 2, 3, 4, 5], mac=TierMac(OTHER_SECRET)), "mac"),
     (bytes(TAG_BYTES) + struct.pack("<4sII", b"PALR", 1 << 31, 0), "record"),
     (MAC.signed(struct.pack("<4sII", b"PALR", 2, 1) + bytes(8), SEGMENT.encode(), b"vocab-v"),
      "record")],
    ids=["id-past-vocab", "negative-id", "unsigned", "other-key", "other-secret",
         "claims-8-GiB", "bad-crc"],
)  # fmt: skip
def test_a_peer_record_that_does_not_check_out_refuses_its_segment(data: bytes, reason: str):
    with pytest.raises(RefusedSegment) as caught:
        read_signed(data, MAC, SEGMENT, "vocab-v", 100)
    assert caught.value.reason == reason


# -- the store on a real redis-server, no model ------------------------------------------------


@pytest.fixture(scope="module")
def plain_tier() -> Iterator[RedisServer]:
    tier = RedisServer()
    yield tier
    tier.stop()


@pytest.fixture
def store(plain_tier: RedisServer) -> Iterator[SharedStore]:
    plain_tier.client().flushall()
    shared = SharedStore(plain_tier.url, "m1", 0.25, MAC, StateBound(per_token=100, fixed=0))
    yield shared
    shared.close()


def refused(reason: str) -> float:
    return metrics.SHARED_REFUSED.labels(reason)._value.get()  # type: ignore[attr-defined]


def test_a_key_of_another_type_or_past_the_bounds_is_a_miss_removed(
    store: SharedStore, plain_tier: RedisServer
):
    client, blob, group = plain_tier.client(), f"reame:kv:m1:b:{KEY}", "reame:kv:m1:g:g1"
    client.hset(blob, "a", "b")  # a hash where a string was written
    client.hset(group, f"100-{KEY}", MAC.sign(group.encode(), f"100-{KEY}".encode()))
    before = refused("mac")
    assert store.entries(["g1"]) == [[(100, KEY)]]
    assert store.get("g1", 100, KEY) is None and refused("mac") == before + 1
    assert not client.exists(blob) and not client.hlen(group) and not store.is_down
    client.set("reame:kv:m1:g:g2", "a string where a hash was written")
    client.hset("reame:kv:m1:g:g3", mapping={f"{n}-{KEY}": b"t" for n in range(1, 5000)})
    before = refused("size")
    assert store.entries(["g2", "g3"]) == [[], []]
    assert refused("size") == before + 2
    assert not client.exists("reame:kv:m1:g:g2", "reame:kv:m1:g:g3")


def test_a_signed_blob_past_what_its_tokens_take_is_not_read_past_its_bound(
    store: SharedStore, plain_tier: RedisServer
):
    blob = f"reame:kv:m1:b:{KEY}"
    plain_tier.client().set(blob, MAC.signed(bytes(8 << 20), blob.encode(), b"m1"))
    read, before = metrics.SHARED_BYTES.labels("read")._value.get(), refused("size")  # type: ignore
    assert store.get("g1", 100, KEY) is None and refused("size") == before + 1
    most = TAG_BYTES + store.bound.blob_bytes(100) + 1
    assert metrics.SHARED_BYTES.labels("read")._value.get() - read <= most  # type: ignore
    assert not plain_tier.client().exists(blob)


def test_a_sync_reads_a_bounded_amount_and_catches_up_on_the_next(
    store: SharedStore, plain_tier: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(tier_listing, "MAX_SYNC_BYTES", 1 << 20)
    vocab, client = "vocab-v", plain_tier.client()
    listing = f"reame:pal:{vocab}:segments"
    for name in ("a.pal", "b.pal", "c.pal"):  # 600 kB each: one a sync
        key = store.segment_key(vocab, name)
        records = [list(range(k, k + 1000)) for k in range(150)]
        client.set(key, b"".join(sign_record(MAC, key, vocab, encode_record(r)) for r in records))
        client.hset(listing, name, MAC.signed(b"open", listing.encode(), name.encode()))
    archive = Palimpsest(tmp_path, vocab, 64 << 20)
    sync = PalimpsestSync(archive, store, vocab, 2000, interval=3600)
    assert [sync.sync() for _ in range(4)] == [150, 150, 150, 0]


# -- for real: a replica, a hostile tier, a replica that never saw the prompts -------------------

BLOB_MODES = ("junk", "truncated", "other-key", "bomb")
MODES = [(mode, signed) for mode in (*BLOB_MODES, "listing") for signed in (False, True)]
GARBAGE_FIELDS = ("²", "99999999999999999999", "-5", "٣٣", "0")
PAST_VOCAB = [1 << 30] * 4  # token ids no model has


@dataclass
class Prompt:
    messages: list[dict]
    answer: str = ""
    prompt_tokens: int = 0
    blobs: dict[str, int] = field(default_factory=dict)  # blob key -> its length (tokens)
    listings: dict[str, list[bytes]] = field(default_factory=dict)  # listing -> its fields
    blocks: list[str] = field(default_factory=list)  # block listings naming its blobs
    bulk: str = ""  # a listing filled past the bounds


@dataclass
class Run:
    prompts: dict[tuple[str, bool], Prompt]
    intact: Prompt
    foreign: Prompt
    replaced: dict[str, bytes]  # blob key -> the value put in its place
    answers: dict[str, httpx.Response]  # by prompt's first words
    rss_growth_kb: int
    refused: dict[str, float]
    rejected: dict[str, float]
    client: redis.Redis


def prompt(seed: int) -> Prompt:
    system = filler_text(seed=seed, num_words=160)
    return Prompt([{"role": "system", "content": system}, {"role": "user", "content": "Why?"}])


def serve(store: str, secret: str, **settings: str) -> ServerProcess:
    env = {
        "REAME_SHARED_STORE": store,
        "REAME_SHARED_STORE_PASSWORD": PASSWORD,
        "REAME_SHARED_STORE_SECRET": secret,
        "REAME_SHARED_STORE_SYNC_SECONDS": "0.5",
        "REAME_SPEC": "on",  # NOTE: the reader drafts from the Palimpsest, hostile ones too
        "REAME_PREFIX_CACHE_RAM_MB": "64",
        **{f"REAME_{k.upper()}": v for k, v in settings.items()},
    }
    return ServerProcess("--threads", "2", "--parallel", "2", "--context-length", "2048", env=env)


def ask(server: ServerProcess, p: Prompt) -> httpx.Response:
    body = {"model": "smollm2-135m", "messages": p.messages, "temperature": 0, "max_tokens": 16}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120)


def all_written(server: ServerProcess) -> bool:
    puts = server.metric("reame_shared_store_seconds_count", 'op="put"')
    covered = server.metric("reame_prefix_cache_writes_covered_total")
    return puts >= server.metric("reame_prefix_cache_snapshots_total") - covered


def answer_cold(
    server: ServerProcess, client: redis.Redis, prompts: list[Prompt], owner: dict[bytes, Prompt]
) -> None:
    """Each prompt answered, then the blobs the tier gained once its states were all written
    filed under it (in `owner`), and its listing entries."""
    for p in prompts:
        reply = ask(server, p)
        assert reply.status_code == 200, reply.text
        p.answer = reply.json()["choices"][0]["message"]["content"]
        p.prompt_tokens = reply.json()["usage"]["prompt_tokens"]
        time.sleep(0.5)  # NOTE: the answer's final state is kept just after its reply
        wait_for(lambda: all_written(server))
        for name in {k for k in client.keys("reame:kv:*:b:*")} - owner.keys():
            owner[name] = p
            p.blobs[name.decode()] = read_header(client.get(name)[TAG_BYTES:])["num_tokens"]
    for listing in client.keys("reame:kv:*:g:*"):
        for f in client.hkeys(listing):
            p = owner[listing.split(b":g:")[0] + b":b:" + f.split(b"-")[1]]
            if p in prompts and f not in p.listings.get(listing.decode(), []):
                p.listings.setdefault(listing.decode(), []).append(f)
    for listing in client.keys("reame:kv:*:p:*"):
        for member in client.zrange(listing, 0, -1):
            key = member[:-TAG_BYTES].split(b"-")[1]
            p = owner[listing.split(b":p:")[0] + b":b:" + key]
            if p in prompts and listing.decode() not in p.blocks:
                p.blocks.append(listing.decode())


def replace_blobs(client: redis.Redis, p: Prompt, mode: str, signed: bool, donor: Prompt,
                  frame: bytes) -> dict[str, bytes]:  # fmt: skip
    model = next(iter(p.blobs)).split(":")[2].encode()
    donor_value = client.get(min(donor.blobs, key=donor.blobs.__getitem__))  # fits the bound
    out = {}
    for name in p.blobs:
        value = client.get(name)
        payload = value[TAG_BYTES:]
        bad = {
            "junk": random.randbytes(len(payload)),
            "truncated": payload[: len(payload) // 2],
            "other-key": donor_value[TAG_BYTES:] if signed else donor_value,
            "bomb": bomb(payload, frame),
        }[mode]
        if signed:
            bad = MAC.signed(bad, name.encode(), model)
        elif mode != "other-key":  # NOTE: another key's value keeps its own (valid) tag
            bad = random.randbytes(TAG_BYTES) + bad
        client.set(name, bad)
        out[name] = bad
    return out


def replace_listings(client: redis.Redis, p: Prompt, signed: bool) -> None:
    """Every field of the prompt's groups and member of its block listings replaced by one no
    replica writes; and a group a lookup
    of the prompt lists, empty until now, filled past the bounds (thousands of fields, one of
    1 kB)."""

    def tag(listing: str, field: str) -> bytes:
        return MAC.sign(listing.encode(), field.encode()) if signed else random.randbytes(32)

    for k, (listing, fields) in enumerate(p.listings.items()):
        client.delete(listing)
        for j, f in enumerate(fields):
            bad = f"{GARBAGE_FIELDS[(j + k) % len(GARBAGE_FIELDS)]}-{f.decode().split('-')[1]}"
            client.hset(listing, bad, tag(listing, bad))
    # the block listings that name its states (found by the longest common prefix): their
    # members in the same garbage
    for k, listing in enumerate(p.blocks):
        members = client.zrange(listing, 0, -1)
        client.delete(listing)
        for j, m in enumerate(members):
            group, _, rest = m[:-TAG_BYTES].decode().partition("/")
            bad = f"{group}/{GARBAGE_FIELDS[(j + k) % len(GARBAGE_FIELDS)]}-{rest.split('-')[1]}"
            client.zadd(listing, {bad.encode() + tag(listing, bad): 1.0})
    blob = min(p.blobs, key=p.blobs.__getitem__)
    payload = client.get(blob)[TAG_BYTES:]
    tokens = array("i", payload[token_span(payload)])
    p.bulk = f"{blob.split(':b:')[0]}:g:{group_chain(tokens)[group_of(64)]}"
    bulk = {f"{n}-{KEY}": tag(p.bulk, f"{n}-{KEY}") for n in range(1, 5000)}
    client.hset(p.bulk, mapping={**bulk, "1" * 1024: b"x"})


def is_listed(p: Prompt, listing: str) -> bool:
    """A group a lookup of the prompt lists: one holding a prefix of the prompt alone, not of
    an answer."""
    return any(int(f.split(b"-")[0]) <= p.prompt_tokens for f in p.listings[listing])


def replace_segments(client: redis.Redis) -> None:
    """Every Palimpsest segment: the writer's own now holds its records followed by token ids
    the model does not have (signed); beside it, junk, another key's records, a record that
    claims 8 GiB and garbage statuses, listed with signed statuses, and one listed unsigned."""
    (listing,) = [k.decode() for k in client.keys("reame:pal:*:segments")]
    vocab = listing.split(":")[2]
    (own,) = [n.decode() for n in client.hkeys(listing)]
    own_key = f"reame:pal:{vocab}:s:{own}"
    records, _ = read_signed(client.get(own_key), MAC, own_key, vocab, 1 << 31)
    poisoned = b"".join(
        sign_record(MAC, own_key, vocab, encode_record([*r.tolist(), *PAST_VOCAB])) for r in records
    )
    client.set(own_key, poisoned)
    segments = {
        "junk.pal": ("open", random.randbytes(4000)),
        "copy.pal": ("open", poisoned),
        "huge.pal": ("open", bytes(TAG_BYTES) + struct.pack("<4sII", b"PALR", 1 << 31, 0)),
        "bad-status.pal": ("sealed:²", b""),
        "overflow.pal": ("sealed:99999999999999999999", b""),
    }
    for name, (status, data) in segments.items():
        client.hset(listing, name, MAC.signed(status.encode(), listing.encode(), name.encode()))
        client.set(f"reame:pal:{vocab}:s:{name}", data)
    client.hset(listing, "unsigned.pal", b"open")
    client.set(f"reame:pal:{vocab}:s:unsigned.pal", encode_record([1, 2, 3, 4, 5]))


def rss_kb(server: ServerProcess, field_name: str) -> int:
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field_name}")


def counters(server: ServerProcess, name: str, reasons: tuple[str, ...]) -> dict[str, float]:
    return {r: server.metric(name, f'reason="{r}"') for r in reasons}


def wait_for(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def run(bomb_frame: bytes) -> Iterator[Run]:
    tier = RedisServer()
    tier.client().config_set("requirepass", PASSWORD)
    client = redis.Redis.from_url(tier.url, password=PASSWORD)
    prompts = {mode: prompt(seed) for seed, mode in enumerate(MODES)}
    intact, foreign = prompt(100), prompt(101)
    servers: list[ServerProcess] = []
    try:
        owner: dict[bytes, Prompt] = {}
        # NOTE: its answers are not shared: the reader is to compute them (or restore states)
        writer = serve(tier.url, SECRET, warm_ahead="false", spec="off", answer_memory="false")
        servers.append(writer)
        answer_cold(writer, client, [*prompts.values(), intact], owner)
        writer.stop()  # NOTE: its last Palimpsest records synced
        other = serve(  # another secret
            tier.url, OTHER_SECRET, palimpsest="false", spec="off", answer_memory="false"
        )
        servers.append(other)
        answer_cold(other, client, [foreign], owner)
        other.stop()
        replaced: dict[str, bytes] = {}
        for (mode, signed), p in prompts.items():
            if mode == "listing":
                replace_listings(client, p, signed)
            else:
                replaced |= replace_blobs(client, p, mode, signed, intact, bomb_frame)
        replace_segments(client)

        reader = serve(tier.url, SECRET)  # never saw a prompt: an empty state directory
        servers.append(reader)
        before = rss_kb(reader, "VmHWM")
        wait_for(lambda: reader.metric("reame_shared_store_refused_total", 'reason="token"') > 0)
        answers = {p.messages[0]["content"][:40]: ask(reader, p)
                   for p in [*prompts.values(), foreign, intact]}  # fmt: skip
        reasons = ("mac", "size", "listing", "record", "token")
        yield Run(
            prompts, intact, foreign, replaced, answers,
            rss_kb(reader, "VmHWM") - before,
            counters(reader, "reame_shared_store_refused_total", reasons),
            counters(reader, "reame_prefix_cache_rejected_files_total", ("corrupt", "tokens")),
            client,
        )  # fmt: skip
    finally:
        for server in servers:
            server.stop()
        tier.stop()


def reply_to(run: Run, p: Prompt) -> httpx.Response:
    return run.answers[p.messages[0]["content"][:40]]


@pytest.mark.model
def test_a_replica_that_never_saw_the_prompts_answers_each_as_a_cold_request(run: Run):
    for (mode, signed), p in [*run.prompts.items(), (("other secret", False), run.foreign)]:
        reply = reply_to(run, p)
        assert reply.status_code == 200, (mode, signed, reply.text)
        assert reply.json()["choices"][0]["message"]["content"] == p.answer, (mode, signed)
        assert reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


@pytest.mark.model
def test_an_intact_entry_beside_them_is_still_restored(run: Run):
    reply = reply_to(run, run.intact)
    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["content"] == run.intact.answer
    assert reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"] >= 100


@pytest.mark.model
def test_memory_stays_bounded_whatever_a_frame_claims(run: Run):
    assert run.rss_growth_kb < 512 << 10, f"RSS grew by {run.rss_growth_kb >> 10} MiB"


@pytest.mark.model
def test_every_kind_of_bad_entry_is_counted_by_its_reason(run: Run):
    # unsigned, another key's tag, another secret; a listing past the bounds; garbage fields
    # and statuses signed; a record claiming 8 GiB; token ids past the vocabulary
    assert all(n >= 1 for n in run.refused.values()), run.refused
    # signed junk, truncated copies and frames that claim 4 GiB; another key's value signed
    assert run.rejected["corrupt"] >= 3 and run.rejected["tokens"] >= 1, run.rejected


@pytest.mark.model
def test_what_was_refused_is_gone_from_the_tier(run: Run):
    for (mode, _), p in run.prompts.items():
        fetched = [b for b, length in p.blobs.items() if length <= p.prompt_tokens]
        for blob in fetched if mode != "listing" else []:
            assert run.client.get(blob) != run.replaced[blob], (mode, blob)
        for listing in [g for g in p.listings if is_listed(p, g)] if mode == "listing" else []:
            left = run.client.hkeys(listing)  # a lookup removed the garbage (a writer adds anew)
            assert all(prefix_entry(f) is not None for f in left), (listing, left[:3])
        assert mode != "listing" or run.client.exists(p.bulk) == 0
