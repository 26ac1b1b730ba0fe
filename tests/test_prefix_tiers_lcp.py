"""The prefix cache where a longer state serves its prefixes (memory that can be cut back),
model-free, on a real directory: a state kept lets go of the RAM copies of its prefixes at its
chunk ends; a file that a RAM state already covers is not read; and the disk's states are filed
by their token ids at start, so that after a restart one serves a prompt that shares only some
of it."""

from __future__ import annotations

from pathlib import Path

from reame import metrics
from reame.cache.keys import group_chain, group_of, prefix_key
from reame.cache.prefix_cache import CacheConfig, PrefixCache
from reame.saved_state import SavedState

FINGERPRINT = "f" * 64
PROMPT = list(range(1, 401))


def state(tokens: list[int], ends: tuple[int, ...]) -> SavedState:
    return SavedState(tuple(tokens), bytes(len(tokens)), chunk_ends=ends)


def cache(directory: Path | None, cut: bool = True) -> PrefixCache:
    config = CacheConfig(
        directory=directory,
        ram_bytes=1 << 20,
        disk_bytes=1 << 30,
        min_tokens=64,
        write_quiet=0.0,
        longer_serves_prefixes=cut,
    )
    return PrefixCache(config, FINGERPRINT)


def disk_reads() -> float:
    return metrics.PREFIX_LOAD_BYTES.labels("disk")._value.get()


def test_a_longer_state_lets_go_of_its_prefixes_in_ram_at_its_chunk_ends(tmp_path: Path) -> None:
    c = cache(None)
    try:
        c.offer(state(PROMPT[:128], (128,)))
        c.offer(state(PROMPT[:200], (200,)))  # 200 is not an end of the state below
        c.offer(state(PROMPT, (128, 256, 400)))
        assert {len(s.tokens) for s in c.ram._items.values()} == {200, 400}
        # what was let go is served by the longer state, cut back where it ended a chunk
        [hit] = c.longer(PROMPT[:210] + [9999] * 50, "", 0)
        assert len(hit.state.tokens) == 400 and 128 in hit.state.known_ends
    finally:
        c.close()


def test_memory_that_cannot_be_cut_keeps_every_prefix(tmp_path: Path) -> None:
    c = cache(None, cut=False)
    try:
        c.offer(state(PROMPT[:128], (128,)))
        c.offer(state(PROMPT, (128, 400)))
        assert {len(s.tokens) for s in c.ram._items.values()} == {128, 400}
    finally:
        c.close()


def test_a_file_a_ram_state_covers_is_not_read(tmp_path: Path) -> None:
    c = cache(tmp_path)
    try:
        c.offer(state(PROMPT[:128], (128,)))
        c.flush()
        c.offer(state(PROMPT, (128, 400)))  # the 128-token state leaves RAM, its file stays
        c.flush()
        before = disk_reads()
        assert c.lookup(PROMPT[:128] + [9999] * 50) is None  # the RAM state serves it
        assert disk_reads() == before
        [hit] = c.longer(PROMPT[:128] + [9999] * 50, "", 0)
        assert hit.source == "ram"
    finally:
        c.close()


def test_on_memory_that_cannot_be_cut_a_longer_ram_state_does_not_stand_for_a_file(
    tmp_path: Path,
) -> None:
    """After a restart the preload reads the most recent state first: a prompt's answer, longer
    than the prompt. Memory that cannot be cut cannot go on from it, so the prompt's own shorter
    file must still be read (stop 43's CI: a hybrid model's restored prompt went cold)."""
    first = cache(tmp_path, cut=False)
    first.offer(state(PROMPT[:128], (128,)))
    first.offer(state(PROMPT, (128, 400)))
    first.close()
    second = cache(tmp_path, cut=False)
    try:
        assert second.preload(*key_of(second, PROMPT))  # the longer state in RAM, as preloaded
        hit = second.lookup(PROMPT[:128] + [9999] * 50)
        assert hit is not None and len(hit.state.tokens) == 128 and hit.source == "disk"
    finally:
        second.close()


def key_of(c: PrefixCache, tokens: list[int]) -> tuple[str, int, str]:
    chain = group_chain(tokens)
    return chain[group_of(len(tokens))], len(tokens), prefix_key(chain, tokens, len(tokens))


def test_after_a_restart_a_disk_state_serves_a_prompt_that_shares_some_of_it(
    tmp_path: Path,
) -> None:
    """Before the disk was filed at start, a restarted cache found a file by its whole prefix
    only: this prompt, which shares 300 of its 400 tokens, was a miss."""
    first = cache(tmp_path)
    first.offer(state(PROMPT, (128, 256, 400)))
    first.close()
    again = cache(tmp_path)
    try:
        prompt = PROMPT[:300] + [9999] * 20
        assert again.lookup(prompt) is None
        [hit] = again.longer(prompt, "", 0)
        assert hit.source == "disk" and hit.state.common_length(prompt) == 300
        assert hit.state.known_ends == (128, 256, 400)
    finally:
        again.close()


def test_a_file_whose_head_was_damaged_is_not_filed(tmp_path: Path) -> None:
    first = cache(tmp_path)
    first.offer(state(PROMPT, (400,)))
    first.close()
    [path] = tmp_path.rglob("*.kvs")
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01  # inside the token ids
    path.write_bytes(bytes(data))
    again = cache(tmp_path)
    try:
        assert len(again.index) == 0
        assert again.longer(PROMPT[:300] + [9999] * 20, "", 0) == []
    finally:
        again.close()
