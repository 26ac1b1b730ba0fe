"""The answer memory's store (answer_memory.py, checked_files.py) on real files and a real
redis-server, and its records (api/remembered.py): model-free. A record comes back as it was
kept, for its owner only; a corrupted or tampered one is a miss; the bounds hold; a changed model
file drops what was kept for the old one; another replica finds an answer through the shared
tier, signed, and nothing unsigned."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reame import metrics
from reame.answer_memory import AnswerMemory
from reame.api.remembered import (
    choices_record,
    recalled_choices,
    recalled_verdict,
    verdict_record,
    why_not_kept,
)
from reame.cache.shared_store import SharedStore
from reame.cache.state_bound import StateBound
from reame.cache.tier_mac import TierMac
from reame.conclave.convene import Candidate, Verdict
from reame.conclave.vote import Tally
from reame.engine.request import Finish, FinishEvent, TokenEvent
from redis_server import RedisServer

MODEL = Path("/models/m.gguf")
KEY_A, KEY_B = "a" * 64, "b" * 64
MAC = TierMac("the replicas' secret, 32 characters or more")


def finish(reason: Finish = Finish.STOP, exact: bool = True, cached: int = 0) -> FinishEvent:
    return FinishEvent(reason, "!", 30, 2, cached, num_accepted_drafts=1, is_exact=exact)


EVENTS = [TokenEvent(5, "Hi", -0.1, ((5, -0.1), (6, -2.5))), TokenEvent(9, " there"), finish()]


def memory(tmp: Path, fingerprint: str = "fp1", **kw: object) -> AnswerMemory:
    return AnswerMemory(tmp / "answers", MODEL, fingerprint, kw.pop("max_bytes", 1 << 20), **kw)  # type: ignore[arg-type]


def test_an_answer_comes_back_as_kept_for_its_owner_only(tmp_path: Path) -> None:
    mem = memory(tmp_path)
    assert mem.keep(KEY_A, "", choices_record([EVENTS]))
    again = memory(tmp_path)  # a restart: read from disk
    choices = recalled_choices(again.recall(KEY_A, "") or {}, vocab_size=100)
    assert choices is not None
    (events,) = choices
    assert events[:2] == EVENTS[:2]
    assert isinstance(events[2], FinishEvent) and events[2].text == "!"
    # nothing of the prompt computed on a hit, and no draft
    assert events[2].num_cached_tokens == 30 and events[2].num_accepted_drafts == 0
    assert again.recall(KEY_A, "owner-b") is None  # another key's memory
    assert again.recall(KEY_B, "") is None


def test_a_corrupted_entry_is_a_miss_and_is_dropped(tmp_path: Path) -> None:
    mem = memory(tmp_path)
    mem.keep(KEY_A, "", choices_record([EVENTS]))
    (path,) = (tmp_path / "answers").rglob(f"{KEY_A}.json")
    data = bytearray(path.read_bytes())
    data[data.index(b"there")] ^= 0x20  # "There": a valid file, not what was kept
    path.write_bytes(bytes(data))
    assert memory(tmp_path).recall(KEY_A, "") is None
    assert not path.exists()
    mem.keep(KEY_A, "", choices_record([EVENTS]))
    path.write_bytes(b"{not json")
    assert memory(tmp_path).recall(KEY_A, "") is None


def test_an_answer_kept_by_another_process_is_found(tmp_path: Path) -> None:
    reader = memory(tmp_path)  # started before the other wrote
    memory(tmp_path).keep(KEY_A, "", choices_record([EVENTS]))
    assert reader.recall(KEY_A, "") is not None


def test_a_changed_model_file_drops_every_answer_of_the_old_one(tmp_path: Path) -> None:
    memory(tmp_path).keep(KEY_A, "", choices_record([EVENTS]))
    assert memory(tmp_path, "fp1").recall(KEY_A, "") is not None
    assert memory(tmp_path, "fp2").recall(KEY_A, "") is None
    assert memory(tmp_path, "fp1").recall(KEY_A, "") is None  # gone, not hidden


def test_the_least_recently_used_goes_first_and_a_key_holds_its_share(tmp_path: Path) -> None:
    one = len(memory(tmp_path / "probe")._files.encode(KEY_A, "k1", choices_record([EVENTS])))
    mem = memory(tmp_path, max_bytes=3 * one + 10, max_owner_bytes=2 * one + 5)
    keys = [f"{i:064x}" for i in range(4)]
    for key in keys[:3]:
        assert mem.keep(key, "k1", choices_record([EVENTS]))
    # k1 holds two at most: its oldest went; then k2's pushes out k1's least recently used
    assert [mem.recall(k, "k1") is not None for k in keys[:3]] == [False, True, True]
    mem.recall(keys[1], "k1")
    assert mem.keep(keys[3], "k2", choices_record([EVENTS]))
    assert mem.keep(KEY_B, "k2", choices_record([EVENTS]))
    assert mem.recall(keys[2], "k1") is None and mem.recall(keys[1], "k1") is not None


def test_a_conclave_record_gives_back_its_verdict() -> None:
    tally = Tally(3, {"42": [0, 2], "41": [1]}, [], [])
    candidates = [
        Candidate([TokenEvent(1, "42")], ["42", "!"], finish()),
        Candidate([TokenEvent(2, "41")], ["41", "!"], finish()),
        Candidate([TokenEvent(1, "42")], ["42", "!"], finish()),
    ]
    verdict = recalled_verdict(verdict_record(Verdict(tally, candidates, 3)), vocab_size=10)
    assert verdict is not None
    assert verdict.summary() == Verdict(tally, candidates, 3).summary()
    assert [c.text for c in verdict.candidates] == [c.text for c in candidates]
    assert verdict.winner.text == "42!" and verdict.tally.agreement() == "2/3"
    assert recalled_choices(verdict_record(Verdict(tally, candidates, 3)), 10) is None


def test_a_record_of_tokens_outside_the_vocabulary_is_no_answer() -> None:
    assert recalled_choices(choices_record([EVENTS]), vocab_size=9) is None
    assert recalled_choices({"kind": "choices", "choices": [[]]}, 100) is None


@pytest.mark.parametrize(
    ("finishes", "why"),
    [
        ([finish(), finish()], None),
        ([finish(Finish.LENGTH)], None),  # cut by max_tokens: kept as what it is
        ([finish(Finish.ABORT)], "failed"),
        ([finish(), finish(Finish.ERROR)], "failed"),
        ([finish(), None], "failed"),  # a choice that never ended
        ([finish(), finish(exact=False)], "inexact"),
    ],
)
def test_only_whole_answers_computed_as_alone_are_kept(
    finishes: list[FinishEvent | None], why: str | None
) -> None:
    assert why_not_kept(finishes) == why


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    s = RedisServer()
    yield s
    s.stop()


def shared(url: str, mac: TierMac = MAC) -> SharedStore:
    return SharedStore(url, "m1", 0.25, mac, StateBound(per_token=1024, fixed=0))


def test_another_replica_finds_an_answer_through_the_shared_tier(
    tmp_path: Path, redis: RedisServer
) -> None:
    redis.client().flushall()
    memory(tmp_path / "one", shared=shared(redis.url)).keep(KEY_A, "", choices_record([EVENTS]))
    before = metrics.ANSWER_LOOKUPS.labels("hit_shared")._value.get()
    other = memory(tmp_path / "two", shared=shared(redis.url))
    assert recalled_choices(other.recall(KEY_A, "") or {}, 100) is not None
    assert metrics.ANSWER_LOOKUPS.labels("hit_shared")._value.get() == before + 1
    assert other.recall(KEY_A, "") is not None  # kept locally since
    assert other.recall(KEY_A, "k2") is None  # not another key's


def test_an_answer_not_signed_with_the_secret_is_a_miss(tmp_path: Path, redis: RedisServer) -> None:
    redis.client().flushall()
    forger = TierMac("somebody else's secret, also 32 characters long")
    memory(tmp_path / "one", shared=shared(redis.url, forger)).keep(
        KEY_A, "", choices_record([EVENTS])
    )
    other = memory(tmp_path / "two", shared=shared(redis.url))
    assert other.recall(KEY_A, "") is None
    assert redis.client().get(f"reame:ans:m1:{KEY_A}") is None  # removed
