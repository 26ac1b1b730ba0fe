"""When idle-time work may start and when a step of it stops (engine/idle_gate.py), without a
model or an engine."""

from __future__ import annotations

import time

from reame.engine.idle_gate import IdleGate

HISTORY = list(range(100, 164))


def test_no_idle_time_step_starts_while_a_request_is_on_its_way_in() -> None:
    gate = IdleGate()
    assert not gate.holds
    with gate.arriving(), gate.arriving():
        assert gate.holds
    assert not gate.holds
    try:
        with gate.arriving():
            raise ValueError("refused while it was prepared")
    except ValueError:
        pass
    assert not gate.holds  # a request refused on its way in holds nothing back


def test_a_step_stops_for_a_request_that_does_not_go_on_from_all_of_its_work() -> None:
    gate = IdleGate()
    with gate.under_way((HISTORY, [7, 8, 9])):
        gate.submitted([*HISTORY, 1, 2])  # the next turn whose history the step computes
        assert not gate.stops()
        gate.submitted(HISTORY[:-1] + [5, 1, 2])  # parts from it inside the step's work
        assert gate.stops()
        gate.taken()
        assert not gate.stops()
    gate.submitted([*HISTORY, 1, 2])  # no step under way: the next one stops at once
    assert gate.stops()


def test_a_step_under_way_stops_once_the_engine_is_stopping_and_its_time_is_up() -> None:
    gate = IdleGate()
    with gate.under_way((HISTORY,)):
        gate.ends_at(time.monotonic() + 60)
        assert not gate.stops()
        gate.ends_at(time.monotonic())
        assert gate.stops()
        gate.taken()  # no request came: the time is still up
        assert gate.stops()
