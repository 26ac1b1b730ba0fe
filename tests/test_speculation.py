"""Speculation in the engine, on the real SmolLM2: greedy and seeded sampled output is the same
token for token with drafts as without; a repeated request is drafted from the Palimpsest, also
after a restart; a draft model drafts, and one of another vocabulary is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import small_settings
from reame.errors import ConfigError
from reame.runtime import Runtime
from reame.speculation.controller import SpecController
from state_dirs import new_state_dir

pytestmark = pytest.mark.model

QUESTIONS = [
    "List the numbers from 1 to 30, one per line.",
    "Write a JSON object with the keys name, age and city.",
    "What is the capital of France?",
    "Repeat the word hello ten times.",
]


def answer(runtime: Runtime, question: str, mode: str) -> list[int]:
    service = runtime.service
    prompt = service.chat.prompt([{"role": "user", "content": question}])
    params = service.sampling(temperature=0.0, max_tokens=96, speculation=mode)
    tokens, _, _ = service.generate(prompt, params)
    return tokens


def drafted(runtime: Runtime, drafter: str) -> tuple[int, int]:
    assert runtime.engine._spec is not None
    stats = runtime.engine._spec.controller.drafters.get(drafter)
    return (stats.proposed, stats.accepted) if stats else (0, 0)


def test_greedy_output_is_the_same_with_drafts_forced_on(smollm2_path: Path) -> None:
    with Runtime(small_settings(smollm2_path, spec="auto")) as runtime:
        plain = {q: answer(runtime, q, "off") for q in QUESTIONS}
        for _ in range(2):  # the second round drafts from the first's answers too
            for q in QUESTIONS:
                assert answer(runtime, q, "on") == plain[q], q
        proposed, accepted = drafted(runtime, "palimpsest")
        assert proposed > 0 and accepted > 0


def test_prompt_lookup_alone_keeps_the_output_too(smollm2_path: Path) -> None:
    with Runtime(small_settings(smollm2_path, palimpsest=False)) as runtime:
        for q in QUESTIONS:
            assert answer(runtime, q, "on") == answer(runtime, q, "off"), q
        proposed, accepted = drafted(runtime, "context")
        assert proposed > 0 and accepted > 0


def test_il_suggeritore_drafts_a_fresh_lists_numbers_and_keeps_the_output(
    smollm2_path: Path,
) -> None:
    with Runtime(small_settings(smollm2_path, palimpsest=False)) as runtime:
        question = "Give me a numbered list of ten fruits, one per line."
        assert answer(runtime, question, "on") == answer(runtime, question, "off")
        proposed, accepted = drafted(runtime, "suggeritore")
        assert proposed > 0 and accepted > 0, (proposed, accepted)


def test_the_palimpsest_drafts_a_repeated_answer_after_a_restart(smollm2_path: Path) -> None:
    state = new_state_dir()
    with Runtime(small_settings(smollm2_path, state_dir=state)) as first:
        expected = answer(first, QUESTIONS[1], "off")
    with Runtime(small_settings(smollm2_path, state_dir=state)) as second:
        assert second.engine._spec is not None and second.engine._spec.palimpsest is not None
        assert second.engine._spec.palimpsest.num_tokens >= len(expected)
        assert answer(second, QUESTIONS[1], "on") == expected
        proposed, accepted = drafted(second, "palimpsest")
        assert accepted >= len(expected) // 2, (proposed, accepted)


def test_a_seeded_sampled_request_is_drafted_and_gives_the_same_tokens(
    smollm2_path: Path,
) -> None:
    with Runtime(small_settings(smollm2_path, spec="on")) as runtime:
        service = runtime.service
        prompt = service.chat.prompt([{"role": "user", "content": QUESTIONS[0]}])
        greedy = service.sampling(temperature=0.0, max_tokens=64, speculation="off")
        service.generate(prompt, greedy)  # the archive learns the most likely answer
        for seed in (1, 2):
            off, on = (
                service.generate(
                    prompt,
                    service.sampling(temperature=0.3, seed=seed, max_tokens=64, speculation=mode),
                )[0]
                for mode in ("off", "on")
            )
            assert on == off, seed
        proposed, accepted = drafted(runtime, "palimpsest")
        assert proposed > 0 and accepted > 0, (proposed, accepted)


def test_a_draft_model_drafts_and_the_greedy_output_is_unchanged(
    smollm2_path: Path, smollm2_draft_path: Path
) -> None:
    settings = small_settings(smollm2_path, draft_model=str(smollm2_draft_path), palimpsest=False)
    with Runtime(settings) as runtime:
        for q in QUESTIONS[:2]:
            assert answer(runtime, q, "on") == answer(runtime, q, "off"), q
        proposed, accepted = drafted(runtime, "draft-model")
        assert proposed > 0 and accepted > 0, (proposed, accepted)
        assert runtime.engine._spec is not None
        stats = runtime.engine._spec.controller.drafters["draft-model"]
        assert stats.seconds_per_draft > 0  # its steps are paid for in the controller's sums


def test_a_draft_model_of_another_vocabulary_is_refused_at_start(
    smollm2_path: Path, gemma_path: Path
) -> None:
    with pytest.raises(ConfigError, match="another vocabulary.*must share the model's tokenizer"):
        Runtime(small_settings(smollm2_path, draft_model=str(gemma_path)))


def enabled(drafter: str) -> float:
    from reame.metrics import REGISTRY

    value = REGISTRY.get_sample_value("reame_speculation_enabled", {"drafter": drafter})
    assert value is not None
    return value


def test_the_enabled_gauge_follows_the_workload_there_and_back(
    smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NOTE: step costs held at a 2-core machine's (a 9-token batch: 6.5 steps), so that the
    # switch follows the drafts' acceptance, not the timing noise of a busy CI machine; the
    # cost measurement has its own tests
    monkeypatch.setattr(SpecController, "record_step", lambda self, n, seconds: None)
    with Runtime(small_settings(smollm2_path, spec="auto")) as runtime:
        assert runtime.engine._spec is not None
        runtime.engine._spec.controller.step_seconds.update(
            {n: 0.008 * n**0.85 for n in range(1, 32)}
        )
        repeated = QUESTIONS[1]  # a JSON object with the keys name, age and city
        answer(runtime, repeated, "auto")  # teaches the archive
        for _ in range(3):
            answer(runtime, repeated, "auto")
        assert enabled("palimpsest") == 1.0
        # alike enough that the archive drafts them, unlike enough that it is wrong
        keys = ["title, year and author", "color, size and price", "river, lake and sea"]
        for k in keys * 2:
            answer(runtime, f"Write a JSON object with the keys {k}.", "auto")
            if enabled("palimpsest") == 0.0:
                break
        assert enabled("palimpsest") == 0.0  # drafts from other answers stopped paying
        for _ in range(30):  # probes find the repeated answers pay again
            answer(runtime, repeated, "auto")
            if enabled("palimpsest") == 1.0:
                break
        assert enabled("palimpsest") == 1.0
