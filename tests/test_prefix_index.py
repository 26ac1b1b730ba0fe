"""The longest-common-prefix index and the reuse it gives, without a model: a stored state that
parts from a prompt after some blocks is found by what they share (not only a state that is a
whole prefix of the prompt), in RAM and on disk, never across scopes; a state that is gone is
dropped when found; and the engine's exactness rule decides how much of it is used."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reame.cache.disk_tier import parse_name
from reame.cache.keys import BLOCK_TOKENS, group_chain
from reame.cache.prefix_cache import CacheConfig, PrefixCache
from reame.cache.prefix_index import PrefixIndex
from reame.cache.prefix_reuse import PrefixReuse
from reame.engine.exact_reuse import TILED_QUERIES, reuse_length
from reame.saved_state import SavedState, common_length
from reame.sessions import SessionStore

FINGERPRINT = "f" * 64
SYSTEM = list(range(1000, 1100))  # 100 tokens
PASSAGE = {name: list(range(base, base + 150)) for name, base in (("a", 2000), ("b", 3000))}


def computed(tokens: list[int], cuts: tuple[int, ...] = ()) -> SavedState:
    """A state as a cold request leaves it: its prompt in chunks of up to 512, cut at `cuts`."""
    ends = sorted({*cuts, len(tokens)})
    chunks = tuple(zip([0, *ends[:-1]], ends, strict=True))
    return SavedState(tuple(tokens), bytes(len(tokens)), tuple(ends), chunks, len(tokens))


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[PrefixCache]:
    config = CacheConfig(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, min_tokens=64)
    cache = PrefixCache(config, FINGERPRINT)
    yield cache
    cache.close()


def test_the_index_finds_the_state_sharing_the_most_blocks_then_tokens() -> None:
    index = PrefixIndex()
    first = [*SYSTEM, *PASSAGE["a"], 7, 8, 9]
    second = [*SYSTEM, *PASSAGE["b"], 7, 8, 9]
    for key, tokens in (("first", first), ("second", second)):
        index.add(key, "g", group_chain(tokens), tokens)
    prompt = [*SYSTEM, *PASSAGE["a"][:70], 5, 5, 5]
    found = index.longest(group_chain(prompt), prompt)
    assert [(s.entry.key, s.length) for s in found] == [("first", len(SYSTEM) + 70)]
    unrelated = list(range(50_000, 50_200))
    assert index.longest(group_chain(unrelated), unrelated) == []


def test_the_index_never_finds_another_scope_and_forgets_what_is_discarded() -> None:
    index = PrefixIndex()
    tokens = [*SYSTEM, *PASSAGE["a"]]
    index.add("alice's", "g", group_chain(tokens, "alice"), tokens)
    assert index.longest(group_chain(tokens, "bob"), tokens) == []
    assert index.longest(group_chain(tokens, "alice"), tokens)[0].entry.key == "alice's"
    index.discard("alice's")
    assert index.longest(group_chain(tokens, "alice"), tokens) == [] and len(index) == 0


def test_the_index_keeps_at_most_its_bound_the_least_recently_used_out_first() -> None:
    index = PrefixIndex(max_entries=2)
    other = list(range(5000, 5150))
    states = {"x": [*SYSTEM, *PASSAGE["a"]], "y": [*SYSTEM, *PASSAGE["b"]], "z": [*SYSTEM, *other]}
    index.add("x", "g", group_chain(states["x"]), states["x"])
    index.add("y", "g", group_chain(states["y"]), states["y"])
    index.longest(group_chain(states["x"]), states["x"])  # x found: used after y
    index.add("z", "g", group_chain(states["z"]), states["z"])
    found = {
        name: {s.entry.key for s in index.longest(group_chain(tokens), tokens)}
        for name, tokens in states.items()
    }
    assert found["x"] == {"x"} and found["z"] == {"z"} and "y" not in found["y"]
    assert len(index) == 2


@settings(max_examples=60, deadline=None)
@given(
    stored=st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=200), min_size=1, max_size=6),
    prompt=st.lists(st.integers(0, 3), min_size=1, max_size=200),
)
def test_the_index_answers_what_a_scan_of_every_state_answers(
    stored: list[list[int]], prompt: list[int]
) -> None:
    index = PrefixIndex()
    for n, tokens in enumerate(stored):
        index.add(str(n), "g", group_chain(tokens), tokens)
    found = index.longest(group_chain(prompt), prompt)
    best = max(common_length(tokens, prompt) for tokens in stored)
    if best < BLOCK_TOKENS:
        assert found == []  # NOTE: a whole block at least, as the tiers file states
    else:
        assert found[0].length == best
        assert common_length(stored[int(found[0].entry.key)], prompt) == best


def test_a_state_that_parts_from_the_prompt_is_found_in_ram_and_then_on_disk(
    cache: PrefixCache, tmp_path: Path
) -> None:
    asked = [*SYSTEM, *PASSAGE["a"], *PASSAGE["b"]]
    cache.offer(computed(asked))
    cache.flush()
    prompt = [*SYSTEM, *PASSAGE["a"], 1, 2, 3]
    assert cache.lookup(prompt) is None  # no stored state is a whole prefix of it
    [hit] = cache.longer(prompt, "", floor=0)
    assert (hit.source, hit.is_partial) == ("ram", True)
    assert hit.state.common_length(prompt) == len(SYSTEM) + len(PASSAGE["a"])
    cache.ram.clear()
    [hit] = cache.longer(prompt, "", floor=0)
    assert hit.source == "disk" and hit.state.tokens == tuple(asked)
    assert cache.longer(prompt, "", floor=len(SYSTEM) + len(PASSAGE["a"])) == []
    assert cache.longer(prompt, "someone", floor=0) == []


def test_a_state_gone_from_both_tiers_is_dropped_from_the_index(
    cache: PrefixCache, tmp_path: Path
) -> None:
    cache.offer(computed([*SYSTEM, *PASSAGE["a"], *PASSAGE["b"]]))
    cache.flush()
    cache.ram.clear()
    for path in [p for p in tmp_path.rglob("*") if parse_name(p.name)]:
        path.unlink()
    prompt = [*SYSTEM, *PASSAGE["a"], 1, 2, 3]
    assert cache.longer(prompt, "", floor=0) == [] and len(cache.index) == 0


def test_a_state_read_back_from_disk_at_start_is_found_by_its_longest_common_prefix(
    tmp_path: Path,
) -> None:
    config = CacheConfig(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, min_tokens=64)
    first = PrefixCache(config, FINGERPRINT)
    first.offer(computed([*SYSTEM, *PASSAGE["a"], *PASSAGE["b"]], cuts=(100,)))
    first.close()
    second = PrefixCache(config, FINGERPRINT)
    try:
        [path] = [p for p in tmp_path.rglob("*") if parse_name(p.name)]
        length, key = parse_name(path.name)  # type: ignore[misc]
        assert second.preload(path.parent.name, length, key)
        prompt = [*SYSTEM, *PASSAGE["a"], 1, 2, 3]
        [hit] = second.longer(prompt, "", floor=0)
        assert hit.state.chunk_ends == (100, 400)
        assert hit.state.chunks == ((0, 100), (100, 400))
    finally:
        second.close()


def test_how_much_of_a_state_is_used_is_the_exactness_rule_on_how_it_was_computed() -> None:
    prompt = [*SYSTEM, *PASSAGE["a"], *range(1, 200)]
    stored = computed([*SYSTEM, *PASSAGE["a"], *PASSAGE["b"]])
    common = stored.common_length(prompt)
    # the rest computes as one tiled chunk, as a cold request computes it: all of it
    assert reuse_length(common, stored, "", (), (), len(prompt), 512) == common
    # how it was computed not known: only where a chunk of it ended (its whole length)
    unknown = SavedState(stored.tokens, stored.data)
    assert reuse_length(common, unknown, "", (), (), len(prompt), 512) == 0
    # a session's own state goes on wherever they part
    own = SavedState(stored.tokens, stored.data, session="alice/chat")
    assert reuse_length(common, own, "alice/chat", (), (), len(prompt), 512) == common
    # a rest too short for the tiled path starts TILED_QUERIES before the prompt's end
    short = [*SYSTEM, *PASSAGE["a"], 1, 2, 3]
    used = reuse_length(stored.common_length(short), stored, "", (), (), len(short), 512)
    assert used == len(short) - TILED_QUERIES


def test_the_plan_restores_the_longest_state_it_may_use_whole_prefix_or_not(tmp_path: Path) -> None:
    config = CacheConfig(None, ram_bytes=1 << 22, disk_bytes=0, min_tokens=64)
    cache = PrefixCache(config, FINGERPRINT)
    reuse = PrefixReuse(cache, SessionStore(8, 1 << 20, 3600))
    try:
        cache.offer(computed(SYSTEM))
        cache.offer(computed([*SYSTEM, *PASSAGE["a"], *PASSAGE["b"]]))
        prompt = [*SYSTEM, *PASSAGE["a"], *random.Random(1).choices(range(9000), k=150)]
        plan = reuse.plan(prompt, "", None, (len(SYSTEM),), take_snapshots=True)
        assert [len(s.state.tokens) for s in plan.stored] == [len(SYSTEM), 400]
        assert reuse.shared(plan.stored, prompt) == len(SYSTEM) + len(PASSAGE["a"])
        # memory that cannot be cut goes on from a whole stored prefix only
        uncut = PrefixReuse(cache, SessionStore(8, 1 << 20, 3600), can_cut=False)
        stored = uncut.prefetch(prompt, "", None)
        assert [len(s.state.tokens) for s in stored] == [len(SYSTEM)]
        assert uncut.shared(stored, prompt) == len(SYSTEM)
    finally:
        cache.close()


def test_states_in_ram_that_share_fewer_tokens_are_offered_too(tmp_path: Path) -> None:
    """The state that shares the most may be used less (its rows near where the prompt leaves
    it computed otherwise than a cold request's: docs/replay/stop52-widened): the engine is
    offered the others in RAM, and takes the one it may go on from the furthest."""
    config = CacheConfig(None, ram_bytes=1 << 22, disk_bytes=0, min_tokens=64)
    cache = PrefixCache(config, FINGERPRINT)
    reuse = PrefixReuse(cache, SessionStore(8, 1 << 20, 3600))
    try:
        # NOTE: both part from it in its fifth block (the index looks in the deepest one)
        first = [*SYSTEM, *PASSAGE["a"][:40], 1, 1, 1]  # parts from the prompt after 140
        second = [*SYSTEM, *PASSAGE["a"][:50], 2, 2, 2]  # after 150: shares the most
        for tokens in (first, second):
            cache.offer(computed(tokens))
        prompt = [*SYSTEM, *PASSAGE["a"][:50], 3, 3, 3, *PASSAGE["b"][:50]]
        [hit] = cache.longer(prompt, "", 0)
        assert hit.state.tokens == tuple(second)
        stored = reuse.prefetch(prompt, "", None)
        assert [s.state.tokens for s in stored] == [tuple(second), tuple(first)]
        assert all(s.tier == "ram" for s in stored)
        assert [h.state.tokens for h in cache.longer(prompt, "", 0, more=2)] == [
            tuple(second),
            tuple(first),
        ]
        # none that shares `floor` or fewer
        assert [h.state.tokens for h in cache.longer(prompt, "", 140, more=2)] == [tuple(second)]
        # memory that cannot be cut is offered none of them
        uncut = PrefixReuse(cache, SessionStore(8, 1 << 20, 3600), can_cut=False)
        assert uncut.prefetch(prompt, "", None) == ()
    finally:
        cache.close()
