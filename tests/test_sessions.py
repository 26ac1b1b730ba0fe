from __future__ import annotations

from reame.saved_state import SavedState
from reame.sessions import SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def state(num_bytes: int) -> SavedState:
    return SavedState(tuple(range(4)), b"x" * num_bytes)


def turn(store: SessionStore, session_id: str, kept: SavedState, owner: str = "") -> None:
    """A turn ends: its state comes from the engine, its count from the server."""
    store.pin_later(session_id, kept, owner)
    store.count_turn(session_id, owner)


def test_a_saved_state_comes_back_and_counts_turns() -> None:
    store = SessionStore(4, 1000, 60)
    turn(store, "a", state(10))
    turn(store, "a", state(20))
    session = store.get("a")
    assert session is not None and session.num_turns == 2 and session.num_bytes == 20


def test_the_least_recently_used_goes_first_when_there_are_too_many() -> None:
    clock = Clock()
    store = SessionStore(2, 1000, 60, clock)
    for sid in ("a", "b"):
        clock.now += 1
        turn(store, sid, state(10))
    store.get("a")
    turn(store, "c", state(10))
    assert sorted(s.session_id for s in store.list()) == ["a", "c"]


def test_the_byte_budget_holds() -> None:
    store = SessionStore(10, 100, 60)
    for sid in ("a", "b", "c"):
        turn(store, sid, state(40))
    assert store.num_bytes <= 100
    assert store.get("c") is not None and store.get("a") is None


def test_a_state_larger_than_the_budget_is_not_kept() -> None:
    store = SessionStore(10, 100, 60)
    turn(store, "big", state(500))
    session = store.get("big")
    assert session is not None and session.state is None and store.num_bytes == 0


def test_idle_sessions_expire() -> None:
    clock = Clock()
    store = SessionStore(10, 1000, 60, clock)
    turn(store, "a", state(1))
    clock.now += 61
    assert store.get("a") is None
    assert store.list() == []


def test_delete_says_whether_there_was_a_session() -> None:
    store = SessionStore(10, 1000, 60)
    store.open("a")
    assert store.delete("a") is True
    assert store.delete("a") is False


def test_a_session_belongs_to_its_owner_and_one_id_names_one_session_per_owner() -> None:
    store = SessionStore(10, 1000, 60)
    turn(store, "chat", state(10), owner="alice")
    assert store.get("chat", owner="bob") is None
    assert store.list(owner="bob") == []
    assert not store.delete("chat", owner="bob")
    turn(store, "chat", state(30), owner="bob")  # bob's own "chat" leaves alice's alone
    alice = store.get("chat", owner="alice")
    assert alice is not None and alice.num_bytes == 10 and alice.num_turns == 1
    assert [s.owner for s in store.list(owner="alice")] == ["alice"]
    assert store.delete("chat", owner="alice") and store.get("chat", owner="bob") is not None


def test_the_store_holds_under_threads() -> None:
    # the prefix lookup reads sessions on the worker threads while the loop opens, lists and
    # deletes them: unlocked, an iteration met a change of size (RuntimeError: a 500)
    import sys
    import threading

    store = SessionStore(max_sessions=8, max_bytes=1 << 20, idle_seconds=3600)
    errors: list[BaseException] = []

    def churn(owner: str) -> None:
        try:
            for i in range(3000):
                sid = f"s{i % 13}"
                turn(store, sid, state(16), owner)
                store.get(f"s{(i + 5) % 13}", owner)
                store.list(owner)
                store.expire()
                if i % 7 == 0:
                    store.delete(sid, owner)
        except BaseException as exc:  # noqa: BLE001 - any failure on a thread is the finding
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=churn, args=(f"key{k}",)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(store) <= store.max_sessions
    assert store.num_bytes <= store.max_bytes


def test_a_key_past_its_share_loses_its_own_oldest_sessions_only() -> None:
    # before the fix one key opening sessions evicted everyone's, least recently used first
    store = SessionStore(max_sessions=8, max_bytes=1 << 20, idle_seconds=3600, max_per_owner=4)
    turn(store, "theirs", state(16), "other-key")
    for i in range(20):
        turn(store, f"mine-{i}", state(16), "flooding-key")
    assert store.get("theirs", "other-key") is not None
    mine = [s.session_id for s in store.list("flooding-key")]
    assert mine == [f"mine-{i}" for i in range(16, 20)]


def test_a_server_without_keys_keeps_every_session_it_has_room_for() -> None:
    store = SessionStore(max_sessions=8, max_bytes=1 << 20, idle_seconds=3600, max_per_owner=4)
    for i in range(8):
        turn(store, f"s{i}", state(16))
    assert len(store.list()) == 8


def test_a_state_pinned_before_its_session_opens_waits_and_an_earlier_one_never_wins() -> None:
    store = SessionStore(10, 1000, 60)
    first = SavedState((1, 2, 3), b"x")
    store.pin_later("s", first)
    assert store.get("s") is None  # the turn is not counted yet: nothing opened
    store.count_turn("s")
    session = store.get("s")
    assert session is not None and session.state == first
    later = SavedState((1, 2, 3, 4, 5), b"y")
    store.pin_later("s", later)
    store.pin_later("s", first)  # warmed after the later turn: an earlier state of it
    store.count_turn("s")
    session = store.get("s")
    assert session is not None and session.state == later
    rewritten = SavedState((1, 2, 9), b"z")  # a template that rewrote the history
    store.pin_later("s", rewritten)
    session = store.get("s")
    assert session is not None and session.state == rewritten


def test_a_deleted_session_gets_no_state_that_was_on_its_way() -> None:
    store = SessionStore(10, 1000, 60)
    store.pin_later("s", SavedState((1, 2, 3), b"y"))  # its turn not counted yet
    assert not store.delete("s")
    store.count_turn("s")  # opened by a new turn
    session = store.get("s")
    assert session is not None and session.state is None
