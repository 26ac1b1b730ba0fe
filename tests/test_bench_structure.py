"""`reame bench --structure`'s workload and runner, on engines of our own making: its prompts are
fresh and distinct, every mode answers every prompt in every run, ratios pair a run's answers,
and the identity check sees an answer that differs between modes."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from reame_bench import spec_runner, structure_runner
from reame_bench.structure_report import as_json, as_table
from reame_bench.structure_runner import (
    ALL_STRUCTURED,
    MODES,
    OFF,
    ON,
    PLAIN,
    PROSE,
    WORKLOAD,
    Answer,
    DraftFigures,
    all_prompts,
    bench_structure,
    ratio_name,
)
from reame_bench.workloads import topics

RATE = {ON: 150.0, OFF: 100.0, PLAIN: 80.0}
TOKENS = 101  # a decode rate of RATE tok/s over the 100 tokens after the first
KEPT = {ON: 60, OFF: 20, PLAIN: 0}  # drafts kept an answer


class Scripted:
    """Answers every prompt with the same tokens at a fixed rate a mode; counts the drafts it
    'kept' as the engines' controllers would."""

    def __init__(self, wrong_in: str = "") -> None:
        self.wrong_in = wrong_in
        self.asked: list[tuple[str, str]] = []
        self.kept: dict[str, int] = defaultdict(int)

    def ask(self, mode: str, prompt: str) -> Answer:
        self.asked.append((mode, prompt))
        self.kept[mode] += KEPT[mode]
        tokens = list(range(TOKENS)) + ([7] if mode == self.wrong_in else [])
        return Answer(tokens, (len(tokens) - 1) / RATE[mode])

    def drafted(self, mode: str) -> dict[str, DraftFigures]:
        kept = self.kept[mode]
        return {"suggeritore": DraftFigures(kept // 3, kept + kept // 3, kept)} if kept else {}


def run(engines: Scripted, runs: int = 3) -> structure_runner.StructureReport:
    return bench_structure(engines.ask, engines.drafted, runs, lambda _: None)


def test_the_prompts_are_distinct_and_asked_nowhere_else_in_the_bench() -> None:
    prompts = all_prompts()
    assert len(prompts) == len(set(prompts))
    assert set(WORKLOAD) >= {"numbered list", "bulleted list", "markdown table", "JSON array"}
    assert PROSE in WORKLOAD
    bench_dir = Path(structure_runner.__file__).parent
    others = "".join(
        p.read_text() for p in bench_dir.glob("*.py") if not p.name.startswith("structure_")
    )
    asked = [*spec_runner.questions(), *topics(16)]
    asked += [spec_runner.document(spec_runner.library(i)) for i in range(40)]
    asked += [spec_runner.fresh(r, m) for r in range(20) for m in spec_runner.MODES]
    for prompt in prompts:
        assert prompt not in others, prompt
        assert all(prompt not in a and a not in prompt for a in asked), prompt


def test_every_mode_answers_every_prompt_every_run_in_rotating_order() -> None:
    engines = Scripted()
    run(engines, runs=3)
    for mode in MODES:
        assert sorted(p for m, p in engines.asked if m == mode) == sorted(all_prompts() * 3)
    firsts = {engines.asked[i * len(engines.asked) // 3][0] for i in range(3)}
    assert firsts == set(MODES)  # each run starts with another mode


def test_the_report_has_every_row_with_paired_ratios_and_tokens_a_step() -> None:
    report = run(Scripted())
    assert set(report.tps) == {*WORKLOAD, ALL_STRUCTURED}
    for row in report.tps:
        assert report.tps[row][ON] == pytest.approx(RATE[ON])
        assert report.ratios[row][ratio_name(ON, OFF)] == pytest.approx(1.5)
        assert report.ratios[row][ratio_name(ON, PLAIN)] == pytest.approx(150 / 80)
        assert report.ratios[row][ratio_name(OFF, PLAIN)] == pytest.approx(100 / 80)
        assert report.tokens_per_step[row][ON] == pytest.approx(100 / (100 - KEPT[ON]))
        assert report.tokens_per_step[row][PLAIN] == pytest.approx(1.0)
    assert report.drafted["JSON array"]["suggeritore"].accepted == KEPT[ON] * 2 * 3
    structured = [p for row, prompts in WORKLOAD.items() if row != PROSE for p in prompts]
    assert report.tokens[ALL_STRUCTURED] == (TOKENS - 1) * len(structured)
    assert report.is_identical


def test_an_answer_that_changes_with_the_suggeritore_fails_the_check() -> None:
    report = run(Scripted(wrong_in=ON), runs=1)
    assert not report.is_identical
    text = as_table({"runs": 1}, report)
    assert "NO   greedy tokens identical" in text


def test_the_table_and_json_name_every_row() -> None:
    report = run(Scripted(), runs=1)
    report.step_costs = {2: 1.8, 4: 2.9}
    text = as_table({"runs": 1}, report)
    for row in report.tps:
        assert row in text and row in as_json({"runs": 1}, report)
    assert "2: 1.80x" in text and "yes  greedy tokens identical" in text
