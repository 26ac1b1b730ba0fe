"""Stored responses on a real disk: kept per key, bounded in count, bytes and per key (least
recently used first), found again after a restart, and a file that does not check out (edited,
another key's, a name that is not an id) a miss."""

from __future__ import annotations

import json
from pathlib import Path

from reame.responses_store import ResponseStore, Stored


def rid(n: int) -> str:
    return f"resp_{'c' * 24}{n:024x}"


def stored(n: int, text: str = "hello") -> Stored:
    conversation = [{"role": "user", "content": text}, {"role": "assistant", "content": "hi"}]
    return Stored(rid(n), rid(0), conversation, {"id": rid(n), "object": "response"})


def test_a_response_is_its_keys_only(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path, 10, 1 << 20)
    assert store.put(stored(1), "alice")
    found = store.get(rid(1), "alice")
    assert found is not None and found.conversation[0]["content"] == "hello"
    assert found.chain == rid(0)
    assert store.get(rid(1), "bob") is None and store.get(rid(1), "") is None
    assert not store.delete(rid(1), "bob")
    assert store.delete(rid(1), "alice") and store.get(rid(1), "alice") is None
    assert not list(tmp_path.glob("*/*.json"))


def test_bounded_in_count_bytes_and_per_key_least_recently_used_first(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path, 3, 1 << 20, max_per_owner=2)
    for n in (1, 2):
        store.put(stored(n), "alice")
    assert store.get(rid(1), "alice") is not None  # 2 is now the least recently used
    store.put(stored(3), "alice")
    assert store.get(rid(2), "alice") is None and store.get(rid(1), "alice") is not None
    store.put(stored(4), "bob")
    store.put(stored(5), "bob")  # the fourth: the least recently used of all goes
    assert len(store) == 3 and store.get(rid(3), "alice") is None
    one = len((tmp_path / "bob" / f"{rid(4)}.json").read_bytes())
    small = ResponseStore(tmp_path / "small", 100, 2 * one)
    for n in (1, 2, 3):
        small.put(stored(n), "")
    assert len(small) == 2 and small.num_bytes <= 2 * one
    assert not small.put(stored(9, "x" * 4 * one), "")  # larger than the whole budget


def test_kept_across_a_restart_and_a_file_that_does_not_check_out_is_a_miss(
    tmp_path: Path,
) -> None:
    store = ResponseStore(tmp_path, 10, 1 << 20)
    for n in (1, 2, 3):
        store.put(stored(n), "alice")
    edited = tmp_path / "alice" / f"{rid(2)}.json"
    edited.write_text(edited.read_text().replace("hello", "jello"))
    moved = tmp_path / "alice" / f"{rid(3)}.json"
    (tmp_path / "bob").mkdir()
    moved.rename(tmp_path / "bob" / moved.name)  # NOTE: its record still names alice
    again = ResponseStore(tmp_path, 10, 1 << 20)
    assert len(again) == 3
    assert again.get(rid(1), "alice") is not None
    assert again.get(rid(2), "alice") is None
    assert again.get(rid(3), "bob") is None and again.get(rid(3), "alice") is None
    assert again.get("../alice/" + rid(1), "alice") is None
    assert json.loads((tmp_path / "alice" / f"{rid(1)}.json").read_text())["sha256"]
