"""The speculation controller, model-free: it turns a drafter on where its runs pay for their
verify batches on the costs it measured, off where they do not, and probes to come back."""

from __future__ import annotations

import pytest

from reame.speculation.controller import PROBE_EVERY, PROBE_LENGTH, SpecController


def measured(cost_of: dict[int, float], mode: str = "auto") -> SpecController:
    c = SpecController(mode=mode, max_length=8)
    for n, seconds in cost_of.items():
        c.record_step(n, seconds)
    return c


# a small model on 2 cores: a 9-token verify batch costs about 5 steps
CHEAP_BATCHES = {n: 0.008 * n**0.75 for n in range(1, 18)}
# compute-bound (the 1.5B shape here): k tokens cost about k steps
DEAR_BATCHES = {n: 0.030 * n for n in range(1, 18)}


def test_a_drafter_that_is_usually_right_is_asked_for_long_runs() -> None:
    c = measured(CHEAP_BATCHES)
    for _ in range(40):
        c.record_drafts("archive", 8, 8)
    assert c.draft_length("archive", 0) == 8
    assert c.is_enabled("archive")


def test_a_drafter_that_is_usually_wrong_is_turned_off_then_probed() -> None:
    c = measured(CHEAP_BATCHES)
    for _ in range(40):
        c.record_drafts("context", 4, 0)
    lengths = [c.draft_length("context", 0) for _ in range(PROBE_EVERY)]
    assert not c.is_enabled("context")
    assert lengths[:-1] == [0] * (PROBE_EVERY - 1)
    assert lengths[-1] == PROBE_LENGTH  # the probe


def test_where_a_batch_costs_as_much_as_its_tokens_nothing_pays() -> None:
    c = measured(DEAR_BATCHES)
    for _ in range(40):
        c.record_drafts("archive", 8, 6)  # 75% of tokens kept: still not worth it here
    assert c.draft_length("archive", 0) == 0
    assert c.best_length(1.0, 0) == 0  # even one that is always right only breaks even


def test_the_switch_follows_the_workload_there_and_back() -> None:
    c = measured(CHEAP_BATCHES)
    states = []
    for phase_accepts in (True, False, True):
        for _ in range(6 * PROBE_EVERY):
            k = c.draft_length("archive", 0)
            if k:
                c.record_drafts("archive", k, k if phase_accepts else 0)
        states.append(c.is_enabled("archive"))
    assert states == [True, False, True]


def test_modes_on_and_off_and_a_requests_own_choice() -> None:
    off = measured(CHEAP_BATCHES, mode="off")
    on = measured(DEAR_BATCHES, mode="on")
    assert off.draft_length("archive", 0) == 0
    assert on.draft_length("archive", 0) == 8
    assert off.draft_length("archive", 0, "on") == 8
    assert on.draft_length("archive", 0, "off") == 0


def test_the_best_accepted_drafter_is_asked_first() -> None:
    c = measured(CHEAP_BATCHES)
    for _ in range(10):
        c.record_drafts("a", 4, 0)
        c.record_drafts("b", 4, 4)
    assert c.order(["a", "b"]) == ["b", "a"]


def test_an_unmeasured_size_is_scaled_from_the_nearest_measured() -> None:
    c = measured({1: 0.01, 4: 0.04})
    assert c._cost(4) == 0.04
    assert abs(c._cost(8) - 0.04 * 2**0.75) < 1e-12
    assert abs(measured({})._cost(16) - 16**0.75) < 1e-12


def test_a_dear_drafter_is_charged_for_its_drafts_and_probed_less_often() -> None:
    c = measured(CHEAP_BATCHES)
    step = c.step_seconds[1]
    for name in ("context", "draft-model"):
        for _ in range(40):
            c.record_drafts(name, 8, 8)  # always right
    for _ in range(40):
        c.record_proposal("draft-model", 4 * 0.7 * step, 4)  # a draft costs 0.7 of a step
    assert c.drafters["context"].acceptance == c.drafters["draft-model"].acceptance
    assert c.draft_length("context", 0) > 0  # free drafts that are right pay
    assert c.draft_length("draft-model", 0) == 0  # its own steps eat what it saves
    assert c.probe_interval("context") == PROBE_EVERY
    # a probe that first catches up on what the sequence said since the last one: 20 steps,
    # 1% of 2000 steps; the first such probe moves the estimate half-way
    while c.draft_length("draft-model", 0) == 0:
        pass
    c.record_proposal("draft-model", 20 * step, PROBE_LENGTH)
    c.record_proposal("draft-model", 20 * step, 8)  # not a probe: a request forced on
    assert c.drafters["draft-model"].probe_seconds == pytest.approx(10 * step)
    assert c.probe_interval("draft-model") == pytest.approx(1000, abs=1)


def test_a_step_that_waited_for_the_cpu_does_not_turn_drafting_off() -> None:
    c = measured(CHEAP_BATCHES)
    for _ in range(40):
        c.record_drafts("archive", 8, 8)
    assert c.draft_length("archive", 0) == 8
    c.record_step(9, 3.0)  # the shared host held one verify batch for 3 s
    assert c.draft_length("archive", 0) >= 6  # as an average it would have turned it off
    for _ in range(80):  # a slowdown that lasts is followed
        c.record_step(1, 0.030)
    assert c.step_seconds[1] == pytest.approx(0.030, rel=0.01)


def test_a_first_step_of_a_size_is_held_to_what_the_sizes_measured_suggest() -> None:
    c = measured({40: 0.16})  # a prompt's prefill came first
    c.record_step(1, 0.010)
    assert c.step_seconds[1] == 0.010
    c.record_step(2, 5.0)  # its first sample waited for the CPU
    assert c.step_seconds[2] == pytest.approx(2 * 0.010 * 2**0.75)


def test_where_memory_cannot_be_cut_checkpoints_and_replays_are_charged() -> None:
    def runs(kept: int) -> SpecController:
        c = measured(CHEAP_BATCHES)
        for _ in range(40):
            c.record_drafts("context", 8, kept)
        return c

    plain, recurrent = runs(7), runs(7)  # a refusal now and then (0.82 kept)
    recurrent.uses_checkpoints = True  # a checkpoint that costs nothing: the replays alone
    assert plain.draft_length("context", 0) > 0
    assert recurrent.draft_length("context", 0) == 0  # the refusals' replays eat the gain
    assert recurrent.rate((("context", 4),), 0) < plain.rate((("context", 4),), 0)
    always, dear = runs(8), runs(8)  # every draft kept: no replays
    always.uses_checkpoints = True
    for _ in range(50):
        dear.record_checkpoint(4 * CHEAP_BATCHES[1])  # a checkpoint as dear as 4 steps
    assert always.draft_length("context", 0) == 8
    assert dear.uses_checkpoints and dear.draft_length("context", 0) == 0
