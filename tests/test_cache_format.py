"""The snapshot file format, the prefix keys and the choice of snapshot points: pure, no disk,
no model. A damaged or foreign snapshot is refused with a reason, never read as wrong data."""

from __future__ import annotations

import hashlib
import json
import random
from array import array
from collections.abc import Iterator
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reame.cache.keys import BLOCK_TOKENS, group_chain, group_of, prefix_key
from reame.cache.prefix_cache import CacheConfig, PrefixCache
from reame.cache.snapshot_format import (
    FORMAT_VERSION,
    MAGIC,
    SnapshotError,
    decode,
    encode,
    read_header,
)
from reame.engine.exact_reuse import TILED_QUERIES
from reame.saved_state import SavedState

FINGERPRINT = "0123456789abcdef01234567"
NUM_TOKENS = 100


def random_state(num_tokens: int = NUM_TOKENS, num_bytes: int = 300_000, seed: int = 1):
    """Random bytes: zstd cannot shrink them, so the compressed state is as large as the state."""
    rng = random.Random(seed)
    tokens = tuple(rng.randrange(0, 50_000) for _ in range(num_tokens))
    return SavedState(tokens, rng.randbytes(num_bytes))


@pytest.fixture(scope="module")
def state() -> SavedState:
    return random_state()


@pytest.fixture(scope="module")
def blob(state: SavedState) -> bytes:
    return encode(state, FINGERPRINT)


def layout(blob: bytes) -> dict[str, int]:
    """Where each part of an encoded file starts (see the snapshot_format docstring)."""
    header_start = len(MAGIC) + 4
    header_end = header_start + int.from_bytes(blob[len(MAGIC) : header_start], "little")
    tokens_end = header_end + 4 * read_header(blob)["num_tokens"]
    state_start = tokens_end + 16
    return {
        "header_start": header_start,
        "header_end": header_end,
        "tokens_end": tokens_end,
        "state_start": state_start,
        "end": len(blob),
    }


def rebuild(header: dict, tokens: tuple[int, ...], compressed: bytes) -> bytes:
    """An encoded file from its parts, with the header checksum computed the way encode does."""
    raw = json.dumps(header, separators=(",", ":")).encode()
    head = MAGIC + len(raw).to_bytes(4, "little") + raw + array("i", tokens).tobytes()
    return head + hashlib.blake2b(head, digest_size=16).digest() + compressed


def refusal(data: bytes, fingerprint: str = FINGERPRINT) -> str:
    with pytest.raises(SnapshotError) as info:
        decode(data, fingerprint)
    return info.value.reason


# -- the file format ---------------------------------------------------------------------------


def test_encode_then_decode_gives_back_the_same_tokens_and_state(
    state: SavedState, blob: bytes
) -> None:
    assert blob.startswith(MAGIC)
    decoded = decode(blob, FINGERPRINT)
    assert decoded.tokens == state.tokens
    assert decoded.data == state.data
    assert isinstance(decoded.tokens, tuple)


def test_round_trip_of_a_compressible_state_and_of_an_empty_state() -> None:
    for snap in (
        SavedState(tuple(range(70)), bytes(range(256)) * 2000),
        SavedState((1, 2, 3), b""),
    ):
        blob = encode(snap, FINGERPRINT)
        assert decode(blob, FINGERPRINT) == snap
    assert len(encode(SavedState((1,), bytes(range(256)) * 2000), FINGERPRINT)) < 20_000


def flip_positions(blob: bytes) -> dict[str, list[int]]:
    at = layout(blob)
    tokens_mid = (at["header_end"] + at["tokens_end"]) // 2
    state_mid = (at["state_start"] + at["end"]) // 2
    return {
        "magic": list(range(0, len(MAGIC))),
        "header length": list(range(len(MAGIC), at["header_start"])),
        # every byte of the JSON header: version, fingerprint, sizes, keys, punctuation
        "header": list(range(at["header_start"], at["header_end"])),
        "token ids": [at["header_end"], tokens_mid, at["tokens_end"] - 1],
        "header checksum": list(range(at["tokens_end"], at["state_start"])),
        "zstd frame start": list(range(at["state_start"], at["state_start"] + 24)),
        "middle of the state": list(range(state_mid - 2, state_mid + 3)),
        "end of the state": list(range(at["end"] - 12, at["end"])),
    }


def test_a_bit_flip_anywhere_is_refused_as_corrupt_and_never_read_as_wrong_data(
    state: SavedState, blob: bytes
) -> None:
    frame_descriptor = layout(blob)["state_start"] + 4  # after zstd's 4-byte magic number
    reasons: dict[str, set[str]] = {}
    accepted: list[tuple[str, int, int]] = []
    for part, positions in flip_positions(blob).items():
        for pos in positions:
            for bit in range(8):
                damaged = bytearray(blob)
                damaged[pos] ^= 1 << bit
                try:
                    decoded = decode(bytes(damaged), FINGERPRINT)
                except SnapshotError as exc:
                    reasons.setdefault(exc.reason, set()).add(f"{part} @{pos} bit {bit}")
                    continue
                # never wrong data: a flip that is accepted must not change what is read
                assert decoded == state, f"{part} @{pos} bit {bit} read as wrong data"
                accepted.append((part, pos, bit))
    assert set(reasons) == {"corrupt"}, {r: sorted(w)[:5] for r, w in reasons.items()}
    # zstd ignores one bit of its frame header (the "unused" bit 4 of the descriptor): a flip
    # there changes nothing that is read; every other flip is refused
    assert all(pos == frame_descriptor and bit == 4 for _, pos, bit in accepted), accepted


def test_a_damaged_frame_content_size_is_refused_without_allocating_it(
    state: SavedState, blob: bytes
) -> None:
    """The zstd frame header says how large the state is, and zstd allocates that; a damaged
    size must be refused (checked against the file header's), not allocated (MemoryError)."""
    frame_descriptor = layout(blob)["state_start"] + 4
    for content_size in (1 << 50, 1 << 62, (1 << 64) - 2):
        damaged = bytearray(blob)
        damaged[frame_descriptor] |= 0xC0  # an 8-byte content size
        damaged[frame_descriptor + 1 : frame_descriptor + 9] = content_size.to_bytes(8, "little")
        assert refusal(bytes(damaged)) == "corrupt"
    damaged = bytearray(blob)
    damaged[frame_descriptor + 4] ^= 0x80  # the 4-byte size plus 2 GB
    assert refusal(bytes(damaged)) == "corrupt"


def truncation_lengths(blob: bytes) -> list[int]:
    at = layout(blob)
    return sorted(
        {
            0,
            1,
            3,
            len(MAGIC),
            at["header_start"] - 1,
            at["header_start"],
            (at["header_start"] + at["header_end"]) // 2,
            at["header_end"] - 1,
            at["header_end"],
            (at["header_end"] + at["tokens_end"]) // 2,
            at["tokens_end"],
            at["tokens_end"] + 8,
            at["state_start"],
            at["state_start"] + 1,
            at["state_start"] + 10,
            (at["state_start"] + at["end"]) // 2,
            at["end"] - 4,
            at["end"] - 1,
        }
    )


def test_a_truncated_file_is_refused_at_every_length(blob: bytes) -> None:
    for length in truncation_lengths(blob):
        assert length < len(blob)
        assert refusal(blob[:length]) == "corrupt", length


def test_a_file_with_bytes_appended_is_refused(blob: bytes) -> None:
    assert refusal(blob + b"\0") == "corrupt"
    assert refusal(blob + blob) == "corrupt"


def test_a_snapshot_of_another_fingerprint_is_refused_as_fingerprint(
    state: SavedState, blob: bytes
) -> None:
    assert refusal(blob, fingerprint="another-model") == "fingerprint"
    assert refusal(encode(state, "another-model")) == "fingerprint"


def test_a_snapshot_of_another_format_version_is_refused_as_version(
    state: SavedState, blob: bytes
) -> None:
    at = layout(blob)
    header = read_header(blob)
    compressed = blob[at["state_start"] :]
    # the same file re-encoded by hand: identical, so it decodes
    assert decode(rebuild(header, state.tokens, compressed), FINGERPRINT) == state
    # a consistent file (its checksum is right) of another version
    for version in (FORMAT_VERSION + 1, 0, "1", None):
        other = rebuild({**header, "version": version}, state.tokens, compressed)
        assert refusal(other) == "version", version
    # a future version that lays out its header differently
    future = rebuild({"version": FORMAT_VERSION + 1, "tokens": 100}, state.tokens, compressed)
    assert refusal(future) == "version"


def test_a_file_that_is_not_a_snapshot_is_refused_as_corrupt() -> None:
    assert refusal(b"") == "corrupt"
    assert refusal(b"GGUF" + bytes(100)) == "corrupt"
    assert refusal(MAGIC + (5).to_bytes(4, "little") + b"[1,2]") == "corrupt"


# -- prefix keys -------------------------------------------------------------------------------


def tokens_of(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(0, 50_000) for _ in range(n)]


def test_block_size_assumed_by_these_tests() -> None:
    assert BLOCK_TOKENS == 32


def test_one_different_token_in_the_last_partial_block_gives_another_key_in_the_same_group() -> (
    None
):
    a = tokens_of(1, 100)  # 3 whole blocks and 4 tokens
    b = a.copy()
    b[98] += 1
    chain_a, chain_b = group_chain(a), group_chain(b)
    assert chain_a == chain_b  # the whole blocks are the same
    assert chain_a[group_of(100)] == chain_b[group_of(100)]
    assert prefix_key(chain_a, a, 100) != prefix_key(chain_b, b, 100)
    assert prefix_key(chain_a, a, 98) == prefix_key(chain_b, b, 98)  # before the difference


def test_one_different_token_in_a_whole_block_gives_another_group_from_that_block_on() -> None:
    a = tokens_of(2, 100)
    b = a.copy()
    b[40] += 1  # in block 1
    chain_a, chain_b = group_chain(a), group_chain(b)
    assert chain_a[:2] == chain_b[:2]
    assert all(x != y for x, y in zip(chain_a[2:], chain_b[2:], strict=True))
    assert prefix_key(chain_a, a, 32) == prefix_key(chain_b, b, 32)
    assert prefix_key(chain_a, a, 64) != prefix_key(chain_b, b, 64)


def test_the_same_prefix_of_two_longer_prompts_has_the_same_key_and_group() -> None:
    prefix = tokens_of(3, 80)
    a = prefix + tokens_of(4, 150)
    b = prefix + tokens_of(5, 7)
    alone = list(prefix)  # what offer() computes from the stored state's own tokens
    chains = [group_chain(t) for t in (a, b, alone)]
    groups = {chain[group_of(80)] for chain in chains}
    keys = {prefix_key(chain, t, 80) for chain, t in zip(chains, (a, b, alone), strict=True)}
    assert len(groups) == 1
    assert len(keys) == 1
    # and prefixes of other lengths have other keys
    assert prefix_key(chains[0], a, 81) not in keys
    assert prefix_key(chains[0], a, 79) not in keys
    assert prefix_key(chains[0], a, 64) not in keys


def test_group_chain_has_one_group_per_whole_block_plus_the_root() -> None:
    assert len(group_chain([])) == 1
    assert len(group_chain(tokens_of(6, 31))) == 1
    assert len(group_chain(tokens_of(6, 32))) == 2
    assert len(group_chain(tokens_of(6, 100))) == 4
    assert len(set(group_chain(tokens_of(6, 200)))) == 7
    assert len(set(map(len, group_chain(tokens_of(6, 100))[1:]))) == 1


def test_group_of_counts_whole_blocks() -> None:
    assert [group_of(n) for n in (0, 1, 31, 32, 33, 63, 64, 100, 128)] == [
        0,
        0,
        0,
        1,
        1,
        1,
        2,
        3,
        4,
    ]


# -- snapshot points ---------------------------------------------------------------------------
# (the contract of SnapshotPolicy.points: the first and last marks and the whole prompt,
# each at least a block past `base`; then stride points, each at least min_tokens past `base`;
# none below min_tokens, none within a block of another, at most max_snapshots)

MIN_TOKENS, MAX_SNAPSHOTS, STRIDE = 64, 4, 512


def points_cache() -> PrefixCache:
    config = CacheConfig(
        directory=None,
        ram_bytes=1 << 20,
        disk_bytes=0,
        min_tokens=MIN_TOKENS,
        max_snapshots=MAX_SNAPSHOTS,
        stride=STRIDE,
    )
    return PrefixCache(config, FINGERPRINT)


@pytest.fixture(scope="module")
def cache() -> Iterator[PrefixCache]:
    prefix_cache = points_cache()
    yield prefix_cache
    prefix_cache.close()


def test_a_prompt_without_marks_is_snapshotted_whole(cache: PrefixCache) -> None:
    assert cache.policy.points(100, []) == (100,)
    assert cache.policy.points(MIN_TOKENS, []) == (MIN_TOKENS,)


def test_a_prompt_shorter_than_min_tokens_gets_no_snapshot(cache: PrefixCache) -> None:
    assert cache.policy.points(MIN_TOKENS - 1, [10, 20, 40]) == ()
    assert cache.policy.points(0, []) == ()


def test_the_first_and_last_marks_are_kept_and_the_ones_between_are_not(
    cache: PrefixCache,
) -> None:
    assert cache.policy.points(450, [100, 200, 300, 400]) == (100, 400, 450)


def test_marks_below_min_tokens_or_not_inside_the_prompt_are_ignored(cache: PrefixCache) -> None:
    assert cache.policy.points(300, [5, 63, 64, 300, 301]) == (64, 300)


def test_long_prompts_get_stride_points_from_the_longest_down(cache: PrefixCache) -> None:
    assert cache.policy.points(1600, []) == (512, 1024, 1536, 1600)
    assert cache.policy.points(1536, []) == (512, 1024, 1536)
    assert cache.policy.points(5000, []) == (3584, 4096, 4608, 5000)


def test_at_most_max_snapshots_with_the_marks_and_the_whole_prompt_first(
    cache: PrefixCache,
) -> None:
    assert cache.policy.points(5000, [100, 700, 2000, 4000]) == (100, 4000, 4608, 5000)


def test_no_two_points_are_within_a_block(cache: PrefixCache) -> None:
    assert cache.policy.points(450, [100, 120, 430]) == (100, 430)
    assert cache.policy.points(1040, [1030]) == (512, 1030)


def test_points_are_past_the_restored_base(cache: PrefixCache) -> None:
    # marks and the whole prompt: a block past it
    assert cache.policy.points(1100, [1010, 1031, 1032, 1070], base=1000) == (1032, 1070)
    assert cache.policy.points(1100, [1010], base=1000) == (1100,)
    assert cache.policy.points(1031, [], base=1000) == ()
    # stride points: min_tokens past it (1024 is not, 1536 and 2048 are)
    assert cache.policy.points(2100, [1500], base=1000) == (1500, 1536, 2048, 2100)
    assert cache.policy.points(1200, [], base=1000) == (1200,)


def test_answers_starts_are_points_whatever_their_spacing_from_the_others(
    cache: PrefixCache,
) -> None:
    # the system prompt ends at 784, answers start at 801 and 892: within a block of a mark
    assert cache.policy.points(900, [784], must=(801, 892)) == (512, 784, 801, 892, 900)
    assert cache.policy.points(900, [784], base=850, must=(801, 892)) == (892, 900)


def test_an_answers_start_less_than_the_spacing_past_the_point_before_is_no_point(
    cache: PrefixCache,
) -> None:
    # 801 is 17 past the system prompt's end, 892 is 70 past the last earlier turn's end (822)
    spaced = cache.policy.points(1000, [784, 822], must=(801, 892), spacing=TILED_QUERIES)
    assert spaced == (512, 784, 822, 892, 1000)
    assert cache.policy.points(900, [784, 822], must=(882,), spacing=TILED_QUERIES) == (
        512,
        784,
        822,
        900,
    )
    assert cache.policy.points(120, [], must=(40,), spacing=TILED_QUERIES) == (120,)
    # a start that is also a mark stays a point
    assert cache.policy.points(900, [784, 801], must=(801,), spacing=TILED_QUERIES) == (
        512,
        784,
        801,
        900,
    )


@settings(max_examples=300, deadline=None)
@given(
    num_tokens=st.integers(0, 20_000),
    marks=st.lists(st.integers(-10, 21_000), max_size=12),
    base=st.integers(0, 20_000),
)
def test_snapshot_points_invariants(num_tokens: int, marks: list[int], base: int) -> None:
    points = points_cache().policy.points(num_tokens, marks, base)
    near = max(base + BLOCK_TOKENS, MIN_TOKENS)
    assert list(points) == sorted(set(points))
    assert len(points) <= MAX_SNAPSHOTS
    assert all(near <= p <= num_tokens for p in points)
    assert all(b - a >= BLOCK_TOKENS for a, b in pairwise(points))
    for p in points:
        if p not in marks and p != num_tokens:
            assert p % STRIDE == 0 and p >= base + MIN_TOKENS
    inside = sorted(m for m in marks if near <= m < num_tokens)
    if inside:
        assert inside[0] in points  # the first mark always
    # the whole prompt, unless a mark kept is within a block of it
    crowded = any(num_tokens - q < BLOCK_TOKENS for q in points if q in inside)
    assert (num_tokens in points) == (num_tokens >= near and not crowded)
