"""`reame bench --spec`'s runner, on a target of our own making: every mode of every target is
asked the same repeated prompts, adversarial prompts are new for each mode, and the identity
check sees an answer that differs from the answer with speculation off."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from reame_bench.spec_runner import AFTER_RESTART, MODES, bench_spec, questions, reworded
from reame_bench.targets import Messages, Timeline


@dataclass
class Speculating:
    """Answers each prompt with a fixed text; `on` decodes twice as fast as `off`, `auto` 1.5x;
    `wrong_in` answers differently in that mode."""

    name: str
    wrong_in: str = ""
    detail: str = "scripted"
    asked: list[tuple[str, str]] = field(default_factory=list)
    restarts: int = 0
    asked_before_restart: int = 0

    async def stream(self, messages: Messages, max_tokens: int, speculation: str = "off"):
        (message,) = messages
        self.asked.append((message["content"], speculation))
        await asyncio.sleep(0)
        rate = {"off": 100.0, "on": 200.0, "auto": 150.0}[speculation]
        text = "answer to " + message["content"]
        if speculation == self.wrong_in:
            text += "!"
        return Timeline(0.0, 1.0, 1.0 + (max_tokens - 1) / rate, max_tokens, text=text)

    async def aclose(self) -> None:
        pass


def run(target: Speculating, runs: int = 2, after_restart: bool = False):
    async def restart() -> None:
        target.restarts += 1
        target.asked_before_restart = len(target.asked)

    return asyncio.run(bench_spec([target], runs, after_restart, {target.name: restart}, print))


def test_every_mode_gets_the_repeated_prompts_and_the_ratios_read_against_off() -> None:
    target = Speculating("t")
    tables, checks = run(target)
    repeated = tables["(a) repeated requests, decode tok/s"]
    same, ratios = repeated.rows["same questions"], repeated.ratios["same questions"]
    assert same["t off"] == pytest.approx(100.0) and same["t on"] == pytest.approx(200.0)
    assert ratios["t on"] == pytest.approx(2.0) and ratios["t auto"] == pytest.approx(1.5)
    assert AFTER_RESTART in repeated.rows and target.restarts == 1
    # after the restart each question is asked in auto before any other mode
    after = target.asked[target.asked_before_restart :]
    for q in questions():
        assert [m for c, m in after if c == q][0] == "auto"
    for mode in MODES:
        asked = {c for c, m in target.asked if m == mode}
        assert set(questions()) <= asked and {reworded(q) for q in questions()} <= asked
    assert checks == {
        "t: greedy answers identical in every mode, one stream at a time": True,
        "t: greedy answers identical in every mode, 4 streams in one batch": True,
    }


def test_adversarial_prompts_are_never_asked_twice() -> None:
    target = Speculating("t")
    run(target)
    repeated = set(questions()) | {reworded(q) for q in questions()}
    fresh = [c for c, _ in target.asked if c not in repeated]
    assert fresh and len(fresh) == len(set(fresh))


def test_an_answer_that_changes_with_speculation_fails_the_check() -> None:
    _, checks = run(Speculating("t", wrong_in="auto"))
    assert checks == {
        "t: greedy answers identical in every mode, one stream at a time": False,
        "t: greedy answers identical in every mode, 4 streams in one batch": False,
    }


def test_after_a_restart_there_is_no_teaching_round_and_no_restart() -> None:
    target = Speculating("t")
    tables, _ = run(target, after_restart=True)
    assert target.restarts == 0
    assert set(tables) == {"(a) repeated requests, decode tok/s"}
    assert target.asked[0][1] == "auto"  # from the archive on disk, before anything else
