"""The one place reuse is decided (engine/reuse_index.py), without a model or a context: one
match over every tier, the exactness rule applied there, the longest common prefix of a longer
state, memory that cannot be cut, and a lock that keeps a match's slot from eviction and its
warming sequence from yielding."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fake_llama import FakeContext
from reame.cache.snapshot_policy import MIN_RESIDENT
from reame.detokenize import TextStream
from reame.engine.request import GenerationRequest
from reame.engine.reuse_index import MAX_FINALS, Match, Resident, ReuseIndex
from reame.engine.scheduler import Scheduler
from reame.engine.sequence import SeqState, Sequence
from reame.llama.context import ContextShape
from reame.sampling import Sampler, SamplingParams
from reame.saved_state import SavedState, Stored

BUDGET = 512
SYSTEM = list(range(1000, 1300))  # 300 tokens every prompt starts with


def sequence(
    prompt: list[int],
    stored: tuple[Stored, ...] = (),
    session: str = "",
    cold_cuts: tuple[int, ...] = (),
    scope: str = "",
) -> Sequence:
    params = SamplingParams(temperature=0.0, max_tokens=4)
    request = GenerationRequest(
        prompt, params, stored=stored, session=session, cold_cuts=cold_cuts, scope=scope
    )
    seq = Sequence(request, lambda e: None, Sampler(params, 5000), TextStream())
    seq.tokens.extend(prompt)
    seq.snapshots_due = list(cold_cuts)
    return seq


def computed(tokens: list[int], session: str = "") -> SavedState:
    """A state computed by a cold request of these very tokens, in chunks of BUDGET."""
    n = len(tokens)
    ends = (*range(BUDGET, n, BUDGET), n)
    chunks = tuple((e - BUDGET if e % BUDGET == 0 else e - n % BUDGET, e) for e in ends)
    return SavedState(tuple(tokens), bytes(n), ends, chunks, n, session)


def resident(tokens: list[int], scope: str = "") -> Resident:
    state = computed(tokens)
    return Resident(tokens, list(state.chunk_ends), list(state.chunks), scope, len(tokens), "")


def warming(tokens: list[int], slot: int, num_computed: int) -> Sequence:
    """An answered sequence in `slot` whose KV holds tokens[:num_computed]."""
    seq = sequence(tokens[:num_computed])
    seq.tokens.extend(tokens[num_computed:])
    seq.slot, seq.state, seq.num_computed = slot, SeqState.WARMING, num_computed
    seq.chunk_ends, seq.chunks = [num_computed], [(0, num_computed)]
    return seq


def tail(seed: int, n: int) -> list[int]:
    return [2000 + (seed * 7919 + i * 31) % 2000 for i in range(n)]


def test_every_tier_is_matched_and_the_longest_wins() -> None:
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    prompt = [*SYSTEM, *tail(1, 120)]
    for tier in ("pinned", "ram", "disk", "shared"):
        seq = sequence(prompt, (Stored(tier, computed(SYSTEM)),))
        found = index.match(seq)
        assert found is not None and (found.tier, found.length) == (tier, 300)
        assert found.state is not None and found.slot == -1
    index.insert(1, resident(prompt[:200]))
    found = index.match(sequence(prompt, (Stored("ram", computed(SYSTEM)),)))
    assert found is not None and (found.tier, found.length) == ("ram", 300)  # longer wins
    index.insert(0, resident(SYSTEM))
    found = index.match(sequence(prompt, (Stored("ram", computed(SYSTEM)),)))
    assert found is not None and (found.tier, found.slot) == ("resident", 0)  # a tie: no copy
    warm = warming([*prompt[:350], 7, 7], slot=2, num_computed=350)
    found = index.match(sequence(prompt), [warm])
    assert found is not None and (found.tier, found.length, found.slot) == ("warming", 350, 2)


def test_a_resident_prefix_too_short_to_pay_and_another_scope_are_not_matched() -> None:
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    index.insert(0, resident(SYSTEM[:20]))
    index.insert(1, resident(SYSTEM, scope="bob"))
    assert index.match(sequence([*SYSTEM, 1, 2], scope="alice")) is None
    found = index.match(sequence([*SYSTEM, 1, 2], scope="bob"))
    assert found is not None and found.slot == 1


def test_a_longer_state_serves_its_common_prefix_cut_where_it_stays_exact() -> None:
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    # a longer state: the system prompt, one passage, then a question; a new prompt shares the
    # system prompt and the passage (364 tokens), then asks otherwise (100 tokens)
    stored = computed([*SYSTEM, *tail(2, 64), *tail(3, 40)])
    prompt = [*SYSTEM, *tail(2, 64), *tail(4, 100)]
    found = index.match(sequence(prompt, (Stored("disk", stored),)))
    # computed in one 404-token chunk, its positions were all in the tiled path: all reused
    assert found is not None and (found.tier, found.length) == ("disk", 364)
    # a rest too short for the tiled path: cut TILED_QUERIES (64) before the prompt's end,
    # and those tokens computed again, as a cold request computes them
    short = [*SYSTEM, *tail(2, 64), 5, 6, 7]
    found = index.match(sequence(short, (Stored("disk", stored),)))
    assert found is not None and found.length == len(short) - 64
    # how the state was computed not known: only its whole length is exact, and it parts
    # before that: nothing
    unknown = SavedState(stored.tokens, stored.data)
    assert index.match(sequence(prompt, (Stored("disk", unknown),))) is None
    # the session's own state goes on wherever they part
    own = SavedState(stored.tokens, stored.data, session="alice/chat")
    found = index.match(sequence(prompt, (Stored("pinned", own),), session="alice/chat"))
    assert found is not None and (found.tier, found.length) == ("pinned", 364)


def test_memory_that_cannot_be_cut_goes_on_from_all_of_a_state_or_none() -> None:
    index = ReuseIndex(can_cut=False, budget=BUDGET)
    longer = computed([*SYSTEM, *tail(2, 100)])
    prompt = [*SYSTEM, *tail(2, 64), *tail(4, 150)]
    assert index.match(sequence(prompt, (Stored("ram", longer),))) is None
    whole = computed(SYSTEM)
    found = index.match(sequence(prompt, (Stored("ram", longer), Stored("disk", whole))))
    assert found is not None and (found.tier, found.length) == ("disk", 300)
    index.insert(0, resident([*SYSTEM, *tail(2, 80)]))  # holds more than the prompt shares
    found = index.match(sequence(prompt, (Stored("disk", whole),)))
    assert found is not None and found.tier == "disk"


def test_a_warming_sequence_whose_state_is_not_read_yet_is_taken_over_only_whole() -> None:
    # its state is not read yet: another conversation's request that shared only the system
    # prompt took its slot over, and its own next turn computed its history again (stop 54 with
    # its work done; stop 55 with work left, once idle-time work waited for requests)
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    history = [*SYSTEM, *tail(1, 60)]
    done = warming(history, slot=1, num_computed=len(history))
    working = warming([*history, 5, 5], slot=1, num_computed=len(history))  # work left
    for warm in (done, working):
        assert index.match(sequence([*SYSTEM, *tail(2, 50)]), [warm]) is None
        found = index.match(sequence([*history, *tail(3, 20)]), [warm])
        assert found is not None and (found.tier, found.length) == ("warming", len(history))


def test_a_group_does_not_take_over_a_warming_sequence() -> None:
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    prompt = [*SYSTEM, *tail(1, 50)]
    warm = warming([*prompt[:320], 9], slot=1, num_computed=320)
    leader = sequence(prompt)
    leader.forks = [sequence(prompt)]
    assert index.match(leader, [warm]) is None
    assert index.match(sequence(prompt), [warm]) is not None


def test_a_locked_slot_is_not_evicted_and_eviction_takes_the_least_recent() -> None:
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    index.insert(0, resident(SYSTEM))
    index.insert(1, resident([*SYSTEM[:100], *tail(5, 100)]))
    index.insert(2, resident(tail(6, 100)))
    assert index.evict([0, 1, 2, 3]) == 3  # a slot holding nothing first
    match = index.match(sequence([*SYSTEM, 1, 2]))
    assert match is not None and match.slot == 0
    index.lock(match)
    assert index.evict([0, 1, 2]) == 1  # the least recently inserted that is not locked
    index.take(1)
    assert index.evict([0, 2]) == 2
    index.lock(Match("resident", 100, resident(tail(6, 100)), slot=2))
    assert index.evict([0, 2]) is None  # every one locked: none is emptied
    index.unlock(match)
    assert index.evict([0, 2]) == 0
    index.insert(0, resident(SYSTEM))  # inserted again: the most recent
    index.unlock(Match("resident", 100, resident(tail(6, 100)), slot=2))
    assert index.evict([0, 2]) == 2


def test_another_conversation_is_not_cut_back_where_a_stored_state_can_go_in_an_empty_slot():
    """Stop 58: every request behind one system prompt went on in the slot that held it (the
    first of equal length), cutting back the conversation there, while the other slots stayed
    empty; a history computed ahead then found its conversation gone and computed it again from
    the system prompt's end (226 tokens where 115 would do, at the Qwen3 1.7B shape). Where a
    slot is empty, a stored state as long is restored there instead."""
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    index.insert(0, resident([*SYSTEM, *tail(1, 120)]))  # another conversation's turn
    mine = sequence([*SYSTEM, *tail(2, 40)], (Stored("ram", computed(SYSTEM)),))
    found = index.match(mine, spare=True)
    assert found is not None and (found.tier, found.length) == ("ram", 300)
    found = index.match(mine)  # no slot empty: it is cut back, no restore
    assert found is not None and (found.tier, found.slot, found.length) == ("resident", 0, 300)
    index.insert(1, resident([*SYSTEM, *tail(3, 20)]))  # hardly past the system prompt
    found = index.match(mine, spare=True)
    assert found is not None and (found.tier, found.slot) == ("resident", 1)


def test_the_scheduler_restores_into_an_empty_slot_and_leaves_a_conversation_resident() -> None:
    context = FakeContext(ContextShape(2 * 512, BUDGET, 2, 1))  # chunks as `computed`'s
    scheduler = Scheduler(context, 512, keeps_prompts=True)
    scheduler.reuse.insert(0, resident([*SYSTEM, *tail(1, 120)]))  # another conversation's
    mine = sequence([*SYSTEM, *tail(2, 40)], (Stored("ram", computed(SYSTEM)),))
    scheduler.add(mine)
    assert scheduler.admit(0.0).admitted == [mine]
    assert mine.slot == 1 and mine.num_cached == 300
    assert scheduler.reuse.holds(0)  # the other conversation is still there


@pytest.mark.parametrize("width", [1, 2])
def test_the_queues_first_request_keeps_the_warming_sequence_it_goes_on_from(width: int) -> None:
    context = FakeContext(ContextShape(2 * 512, 64, 2, 1))
    scheduler = Scheduler(context, 512, keeps_prompts=True)
    prompt = [*SYSTEM[:100], *tail(1, 20)]
    mine = warming([*prompt[:110], 3], slot=0, num_computed=110)  # the oldest warming
    other = warming(tail(7, 90), slot=1, num_computed=80)
    for slot, warm in enumerate((mine, other)):
        scheduler.slots.place(warm, None)
        assert warm.slot == slot
        scheduler.warm(warm)
    seq = sequence(prompt)
    if width == 2:
        seq.forks = [sequence(prompt)]  # a group: it cannot go on in a warming sequence
    scheduler.add(seq)
    yielded = scheduler.to_yield()
    # oldest first, but never the one the request goes on in (which needs no free slot)
    assert yielded == ([] if width == 1 else [mine, other])
    if width == 1:
        admission = scheduler.admit(0.0)
        assert admission.admitted == [seq] and seq.slot == 0 and seq.num_cached == 110
        assert mine.state is SeqState.FINISHED and scheduler.warming == [other]


def test_a_sessions_final_state_kept_after_its_next_turn_was_prefetched_is_gone_on_from() -> None:
    """Without a prefix cache nothing else holds it (stop 45: a chain's second call computed
    its whole prompt when it was queued before the first call's state reached the store).
    Fails without ReuseIndex.kept_final."""
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    answered = [*SYSTEM, *tail(1, 40)]
    index.kept_final(computed(answered[:-10], session="key/chat"), "key")
    index.kept_final(computed(answered, session="key/chat"), "key")  # its newer one replaces it
    next_turn = [*answered, *tail(2, 30)]
    found = index.match(sequence(next_turn, session="key/chat", scope="key"))
    assert found is not None and (found.tier, found.length) == ("pinned", len(answered))
    assert index.match(sequence(next_turn, session="key/other", scope="key")) is None
    assert index.match(sequence(next_turn, scope="key")) is None
    for i in range(MAX_FINALS - 1):
        index.kept_final(computed(SYSTEM, session=f"key/s{i}"), "key")
    assert index.match(sequence(next_turn, session="key/chat", scope="key")) is not None
    index.kept_final(computed(SYSTEM, session="key/last"), "key")
    assert index.match(sequence(next_turn, session="key/chat", scope="key")) is None  # bounded


def test_a_final_state_read_after_its_next_turn_was_prefetched_is_gone_on_from_in_its_scope() -> (
    None
):
    """Stop 55: a chat's history, computed ahead, was read while its next turn was prefetched,
    so the turn missed it in RAM; idle-time work then took the slot that held it, and the turn
    computed 84 tokens instead of 20. Fails without kept_final for requests of no session."""
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    history = [*SYSTEM, *tail(1, 64)]
    state = computed(history)
    index.kept_final(state, "alice")
    next_turn = [*history, *tail(2, 20)]
    found = index.match(sequence(next_turn, scope="alice"))
    assert found is not None and (found.tier, found.length) == ("ram", len(history))
    assert found.state is state
    assert index.match(sequence(next_turn, scope="bob")) is None  # never across scopes
    assert index.match(sequence(next_turn, session="alice/chat", scope="alice")) is None
    # prefetched after all: the same state is matched once, as the tier that found it
    stored = (Stored("ram", state),)
    found = index.match(sequence(next_turn, stored, scope="alice"))
    assert found is not None and found.state is state
    for i in range(MAX_FINALS):
        index.kept_final(computed([*SYSTEM, *tail(10 + i, 64)]), "alice")
    found = index.match(sequence(next_turn, scope="alice"))  # bounded: the system prompt's
    assert found is not None and (found.tier, found.length) == ("ram", len(SYSTEM))
    # a restore is not worth a few tokens (the stores' own states share a block at least)
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    index.kept_final(computed([*SYSTEM[: MIN_RESIDENT - 1], *tail(9, 40)]), "alice")
    assert index.match(sequence(next_turn, scope="alice")) is None


def test_a_resident_with_its_prompts_last_logits_serves_the_same_prompt_whole() -> None:
    index = ReuseIndex(can_cut=True, budget=BUDGET)
    prompt = [*SYSTEM, *tail(3, 40)]
    logits = np.arange(5000, dtype=np.float32)
    answered = replace(resident([*prompt, 7, 8, 9]), num_prompt=len(prompt), prompt_logits=logits)
    index.insert(0, answered)
    found = index.match(sequence(prompt))
    assert found is not None and (found.tier, found.length) == ("resident", len(prompt))
    assert found.prompt_logits is logits
    # another prompt, one that goes on past it, a group: the prompt's last token is computed
    for other in (sequence([*prompt[:-1], 5]), sequence([*prompt, 7])):
        found = index.match(other)
        assert found is not None and found.length < other.num_prompt
        assert found.prompt_logits is None
    group = sequence(prompt)
    group.lead([sequence(prompt)])
    found = index.match(group)
    assert found is not None and found.length < len(prompt) and found.prompt_logits is None
    # without its logits, or on memory that cannot be cut back past its answer: the same
    index.insert(0, replace(answered, prompt_logits=None))
    assert index.match(sequence(prompt)).length < len(prompt)
    stiff = ReuseIndex(can_cut=False, budget=BUDGET)
    stiff.insert(0, answered)
    found = stiff.match(sequence(prompt))
    assert found is None or found.prompt_logits is None


@pytest.mark.parametrize("can_cut", [True, False])
def test_memory_that_cannot_be_cut_keeps_a_snapshot_point_close_past_the_state_gone_on_from(
    can_cut: bool,
) -> None:
    # stop 59: where memory cannot be cut a cold request keeps an answer's start however close
    # (cache/prefix_reuse.py), but a request that went on from the system prompt's state
    # dropped it and computed its message as one chunk: at the Qwen3.5 2B shape 6 of 6 first
    # turns answered otherwise than cold. Where memory can be cut, a cold request drops it too
    context = FakeContext(ContextShape(2 * 512, BUDGET, 2, 1), can_cut=can_cut)
    scheduler = Scheduler(context, 512, keeps_prompts=True)
    answer_start = len(SYSTEM) + 16
    mine = sequence([*SYSTEM, *tail(3, 20)], (Stored("ram", computed(SYSTEM)),))
    mine.snapshots_due = [len(SYSTEM), answer_start, len(SYSTEM) + 20]
    scheduler.add(mine)
    assert scheduler.admit(0.0).admitted == [mine]
    assert mine.num_cached == len(SYSTEM)
    kept = [len(SYSTEM) + 20] if can_cut else [answer_start, len(SYSTEM) + 20]
    assert mine.snapshots_due == kept
