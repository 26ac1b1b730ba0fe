"""`reame bench --conclave`: its quiz is answerable by its own rules, and a short real run gives
every row and check."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conftest import small_settings
from reame.conclave.answers import extract
from reame.runtime import Runtime
from reame_bench.conclave_runner import CONCLAVE, CONCLAVE_ALL, QUIZ, SEQUENTIAL, bench_conclave


def test_every_quiz_answer_is_what_its_rule_extracts_from_a_plain_reply() -> None:
    questions = [q for q, _, _ in QUIZ]
    assert len(set(questions)) == len(questions)
    for _, answer, rule in QUIZ:
        assert extract(f"{answer}.", rule) == answer
        assert extract(f"The answer is {answer}.", rule) == answer


@pytest.mark.model
def test_a_short_run_reports_time_tokens_accuracy_and_the_early_stop(smollm2_path: Path) -> None:
    settings = small_settings(smollm2_path, palimpsest=False)
    with Runtime(settings) as runtime:
        rows, checks = asyncio.run(bench_conclave(runtime, 1, 12, lambda _: None, num_questions=2))
    modes = {SEQUENTIAL, CONCLAVE, CONCLAVE_ALL}
    assert set(rows["wall time s (all questions)"]) == modes
    assert rows["wall time / 5 sequential"][SEQUENTIAL] == 1.0
    assert rows["tokens generated"][SEQUENTIAL] == rows["tokens generated"][CONCLAVE_ALL]
    assert set(rows["accuracy"]) == {"greedy", "mean single sampled", CONCLAVE, CONCLAVE_ALL}
    assert all(0.0 <= v <= 1.0 for v in rows["accuracy"].values())
    assert rows["early stop"]["tokens saved (measured)"] >= 0
    assert all(checks.values()), checks
