"""The same prompt again on the real SmolLM2: a resident slot that holds exactly the prompt and
the logits its last token gave answers it without computing a token of it, and answers as a cold
request does (the same seed, the same tokens); a prompt that differs, or went on from an earlier
answer, computes its last token as before."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from conftest import small_settings
from reame import metrics
from reame.engine.request import FinishEvent
from reame.runtime import Runtime
from reame.service import Job
from reame_bench.workloads import filler_text

pytestmark = pytest.mark.model

SYSTEM = "You answer in one short sentence. " + filler_text(seed=5, num_words=300)


def messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def ask(runtime: Runtime, question: str, seed: int) -> tuple[list[int], int, int]:
    """A sampled answer's tokens, how many prompt tokens were restored, and the prompt's."""
    service = runtime.service
    chat = messages(question)
    prompt = service.chat.prompt(chat)
    params = service.sampling(temperature=0.9, seed=seed, max_tokens=16)
    job = Job(prompt, params, marks=service.chat.marks(chat, prompt))
    events: queue.SimpleQueue = queue.SimpleQueue()
    runtime.engine.submit(service.request(job), events.put)
    tokens = []
    while not isinstance(event := events.get(timeout=120), FinishEvent):
        tokens.append(event.token)
    service.finished(event)
    return tokens, event.num_cached_tokens, len(prompt)


def answered_whole() -> float:
    return metrics.REGISTRY.get_sample_value("reame_prompts_answered_whole_total") or 0.0


@pytest.fixture(scope="module")
def cold(smollm2_path: Path) -> dict[int, list[int]]:
    """Each seed's answer to the question by a fresh server (nothing reused)."""
    out = {}
    for seed in (1, 2):
        with Runtime(small_settings(smollm2_path, spec="off")) as runtime:
            tokens, cached, _ = ask(runtime, "Name a colour.", seed)
            assert cached == 0
            out[seed] = tokens
    assert out[1] != out[2]  # NOTE: else the seeds would not tell a replay from a recompute
    return out


def test_the_same_prompt_again_computes_nothing_and_answers_as_a_cold_request(
    smollm2_path: Path, cold: dict[int, list[int]]
) -> None:
    with Runtime(small_settings(smollm2_path, spec="off")) as runtime:
        assert ask(runtime, "Name a colour.", seed=1)[0] == cold[1]
        before = answered_whole()
        for seed in (2, 1):  # NOTE: the second time from the logits the first replay kept
            tokens, cached, num_prompt = ask(runtime, "Name a colour.", seed)
            assert (tokens, cached) == (cold[seed], num_prompt)
        assert answered_whole() == before + 2


def test_another_prompt_computes_at_least_its_last_token(
    smollm2_path: Path, cold: dict[int, list[int]]
) -> None:
    with Runtime(small_settings(smollm2_path, spec="off")) as runtime:
        ask(runtime, "Name a colour.", seed=1)
        before = answered_whole()
        _, cached, num_prompt = ask(runtime, "Name a fruit.", seed=1)
        assert 300 <= cached < num_prompt
        assert answered_whole() == before
