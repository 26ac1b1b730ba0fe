"""Prefix reuse's one interface without a model: the longest match across a session's pinned
state and the cache (a session's state for that session only), the snapshot plan past what is
restored, and what a finished answer leaves behind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from reame.cache.prefix_cache import CacheConfig, PrefixCache
from reame.cache.prefix_reuse import PrefixReuse, SessionKey
from reame.engine.outbox import Kept
from reame.engine.request import Finish, FinishEvent
from reame.saved_state import SavedState
from reame.sessions import SessionStore

ALICE, BOB = SessionKey("alice", "chat-1"), SessionKey("bob", "chat-1")


@pytest.fixture
def reuse() -> Iterator[PrefixReuse]:
    config = CacheConfig(directory=None, ram_bytes=1 << 20, disk_bytes=0, min_tokens=64)
    cache = PrefixCache(config, "f" * 64)
    yield PrefixReuse(cache, SessionStore(8, 1 << 20, 3600))
    cache.close()


def state(tokens: list[int]) -> SavedState:
    return SavedState(tuple(tokens), bytes(len(tokens)))


PROMPT = list(range(1, 301))


def turn(reuse: PrefixReuse, session: SessionKey, final: SavedState, num_restored: int = 0) -> None:
    """A session's turn ends: its final state from the engine, its count from the server."""
    reuse.keep(Kept(replace(final, session=session.name), "", True, num_restored))
    n = len(final.tokens)
    reuse.finished(FinishEvent(Finish.STOP, "", n, 0, num_cached_tokens=num_restored), session)


def test_the_longest_prefix_wins_and_a_session_state_is_matched_by_its_session_alone(
    reuse: PrefixReuse,
) -> None:
    reuse.keep(Kept(state(PROMPT[:128]), ""))
    turn(reuse, ALICE, state([*PROMPT[:200], 999]))  # the last turn's answer differs: 200 shared
    # her session's state, the longest whole prefix, and her last turn's state again (offered
    # to the cache too), which parts from the prompt after 200 tokens
    found = reuse.prefetch(PROMPT, "", ALICE)
    assert [(s.tier, len(s.state.tokens)) for s in found] == [
        ("pinned", 201), ("ram", 128), ("ram", 201)
    ]  # fmt: skip
    assert reuse.shared(found, PROMPT) == 200  # snapshots past there (the engine decides)
    other = reuse.prefetch(PROMPT, "", BOB)  # the same id under another key: not Alice's
    assert [s.tier for s in other] == ["ram", "ram"]
    assert reuse.unpin(ALICE)
    assert "pinned" not in [s.tier for s in reuse.prefetch(PROMPT, "", ALICE)]


def test_the_plan_snapshots_past_what_it_restores_and_not_what_is_stored(
    reuse: PrefixReuse,
) -> None:
    cold = reuse.plan(PROMPT, "", None, marks=(100,), take_snapshots=True)
    assert cold.stored == () and cold.snapshot_at == (100, 300)
    assert cold.keep_state and cold.keep_state_min_new == 32  # kept if it adds a block
    reuse.keep(Kept(state(PROMPT[:100]), ""))
    warm = reuse.plan(PROMPT, "", None, marks=(100,), take_snapshots=True)
    assert [len(s.state.tokens) for s in warm.stored] == [100]
    assert warm.snapshot_at == (300,)  # 100 is stored already
    # NOTE: but its chunks still end there, as the cold request's: a reuse is exact only where
    # the rest is computed as a cold request computes it (docs/replay/stop52-widened)
    assert warm.cold_cuts == (100, 300) and warm.cut_at == (100,)
    session = reuse.plan(PROMPT, "", ALICE, marks=(), take_snapshots=False)
    assert session.snapshot_at == () and session.keep_state and session.keep_state_min_new == 0


def test_an_answer_whose_history_is_computed_ahead_keeps_no_final_state(
    reuse: PrefixReuse,
) -> None:
    """Its template drops the thought (the cuts where answers start): the next turn parts from
    the final state where this answer starts, and the history computed ahead is what it goes on
    from, for a session too. Fails without the rule (the final state kept)."""
    for session in (None, ALICE):
        plan = reuse.plan(PROMPT, "", session, marks=(100,), take_snapshots=True, must=(298,))
        assert not plan.keep_state, session
        assert 298 in plan.cold_cuts  # its chunks still end where its answer starts


def test_a_finished_answer_is_pinned_for_its_session_and_offered_to_everyone(
    reuse: PrefixReuse,
) -> None:
    final = state([*PROMPT, 7, 8, 9])
    turn(reuse, ALICE, final)
    kept = reuse.sessions.get("chat-1", "alice").state  # type: ignore[union-attr]
    assert kept == replace(final, session=ALICE.name)
    prompt = [*PROMPT, 7, 8, 9, 10]
    assert reuse.shared(reuse.prefetch(prompt, "", None), prompt) == len(PROMPT) + 3
    assert reuse.cache is not None
    before = reuse.cache.ram.num_bytes
    # restored 290 of 303: adds less than a block; pinned for its session, not in the cache
    turn(reuse, BOB, state([*PROMPT[:290], 5, 6, 7]), num_restored=290)
    assert reuse.cache.ram.num_bytes == before
    assert reuse.sessions.get("chat-1", "bob").state is not None  # type: ignore[union-attr]
