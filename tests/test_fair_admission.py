"""Which waiting request gets a free sequence when keys compete (engine/fair_admission.py):
pure, no model. Before it the queue was first come, first served, and a key that sent its
requests first took every sequence (test_a_flooding_key...: index 0, the flood's)."""

from collections import Counter

from reame.engine.fair_admission import (
    ACTIVE_GRACE_SECONDS,
    RecentOwners,
    fair_share,
    next_admitted,
    shares,
    yielding_owners,
)


def test_a_flooding_key_does_not_go_before_a_key_that_runs_nothing():
    waiting = ["flood", "flood", "flood", "victim"]
    assert next_admitted(waiting, ["flood", "flood"], 4) == 3


def test_a_key_alone_takes_every_sequence_first_come_first():
    assert next_admitted(["a", "a", "a"], ["a", "a", "a"], 4) == 0
    assert next_admitted(["a"], ["a"] * 4, 4) is None  # NOTE: the slots' limit, not a share


def test_no_key_runs_more_than_its_share_while_another_key_has_requests():
    # two keys: two sequences each; the flood waits though a sequence may be free
    assert next_admitted(["flood"], ["flood", "flood", "victim"], 4) is None
    assert next_admitted(["flood", "victim"], ["flood", "flood", "victim"], 4) == 1


def test_ties_go_to_the_first_to_come():
    assert next_admitted(["b", "a"], ["a", "b"], 4) == 0


def test_a_share_is_at_least_one_sequence_and_rounds_up():
    assert fair_share(4, 2) == 2
    assert fair_share(4, 3) == 2
    assert fair_share(2, 5) == 1
    assert fair_share(4, 0) == 4


def test_a_key_that_asks_for_more_than_its_share_runs_half_of_it_beside_one_within_it():
    # the victim runs its two (its share of 4); the flood, six asked, gets one, not two
    running = ["victim", "victim", "flood"]
    assert next_admitted(["flood"] * 5, running, 4) is None
    assert shares(["flood"] * 5, Counter(running), 4) == {"victim": 2, "flood": 1}


def test_keys_that_all_ask_for_more_share_equally():
    running = ["a", "b"]
    assert shares(["a", "a", "b", "b"], Counter(running), 4) == {"a": 2, "b": 2}
    assert next_admitted(["a", "a", "b", "b"], running, 4) == 0


def test_a_key_alone_may_ask_for_more_and_take_every_sequence():
    assert shares(["a"] * 9, Counter(["a"]), 4) == {"a": 4}


def test_a_key_whose_next_request_is_a_moment_away_keeps_its_share():
    # the victim's last request just ended, its next comes in milliseconds: the flood does not
    # take every sequence meanwhile (it took them all and held them for seconds before)
    assert next_admitted(["flood"], ["flood"], 4) == 0
    assert next_admitted(["flood"] * 5, ["flood"], 4, recent_owners=["victim"]) is None
    recent = RecentOwners()
    recent.saw(["victim"], now=100.0)
    recent.saw([], now=100.0 + ACTIVE_GRACE_SECONDS + 0.1)
    assert list(recent) == []


def test_only_a_key_that_asks_past_its_share_beside_one_within_it_yields_steps():
    assert yielding_owners(["flood"] * 5, ["victim", "victim", "flood"], 4) == {"flood"}
    assert yielding_owners(["a", "a", "b", "b"], ["a", "b"], 4) == set()
    assert yielding_owners(["a"] * 9, ["a"], 4) == set()
