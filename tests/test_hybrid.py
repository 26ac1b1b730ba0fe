"""Hybrid memory on a real llama.cpp context: a tiny synthetic Qwen3.5-shaped model (3 gated
delta net layers, whose recurrent state cannot be cut back, and 1 full attention layer; random
weights, so its text is noise and only the token ids are compared). Speculation, snapshots,
sessions and the Conclave must give exactly what the model writes alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from conftest import small_settings
from reame import metrics
from reame.conclave.convene import convene
from reame.engine.exact_run import PROBE_LIMIT, longest_exact_run
from reame.runtime import Runtime
from reame.service import Job
from reame.speculation.kit import Speculation
from reame_bench.synthetic import build_synthetic
from state_dirs import new_state_dir

pytestmark = pytest.mark.model

PROMPT_WORDS = "one two three four five six seven eight nine ten " * 6


@pytest.fixture(scope="module")
def tiny_path() -> Path:
    return build_synthetic("qwen3.5-tiny", new_state_dir(), num_threads=2)


@pytest.fixture(scope="module")
def hybrid(tiny_path: Path) -> Iterator[Runtime]:
    with Runtime(small_settings(tiny_path, spec="on", kv_type="q8_0")) as runtime:
        yield runtime


def greedy_tokens(runtime: Runtime, prompt: list[int], speculation: str, n: int = 48) -> list[int]:
    params = runtime.service.sampling(temperature=0.0, max_tokens=n, speculation=speculation)
    return runtime.service.generate(prompt, params)[0]


class HalfRight:
    """Drafts for a known answer: wrong at every third position, right and then wrong at the
    others, so that at any verify length some drafts are kept and some refused (a refusal moves
    a sequence on by 1 token, a kept first draft by 2: it cannot keep stepping over the wrong
    positions)."""

    name = "half-right"
    runs_a_model = False

    def __init__(self, prompt: list[int], answer: list[int]) -> None:
        self.num_prompt, self.answer = len(prompt), answer

    def propose(self, history: Sequence[int], k: int) -> list[int]:
        j = len(history) - self.num_prompt
        first = self.answer[j] if j % 3 and j < len(self.answer) else 111
        return [first, *[222] * (k - 1)][:k]

    def observe(self, proposed: int, accepted: int) -> None:
        pass


def answer_then_draft_half_right(
    runtime: Runtime, prompt: list[int], monkeypatch: pytest.MonkeyPatch, n: int = 32
) -> list[int]:
    """The greedy answer without drafts; then every sequence drafts from HalfRight alone."""
    off = greedy_tokens(runtime, prompt, "off", n)
    drafter = HalfRight(prompt, off)
    # NOTE: on the class (its instances have slots); only this runtime drafts meanwhile
    monkeypatch.setattr(Speculation, "drafters", lambda *_, **__: {drafter.name: drafter})
    return off


def test_the_model_is_known_as_hybrid_and_cannot_be_cut(hybrid: Runtime) -> None:
    assert hybrid.model.memory_kind == "hybrid" and not hybrid.context.can_cut
    # NOTE: how long a verify run may be and round as one-token steps do depends on the machine
    exact = hybrid.engine.paths.run or PROBE_LIMIT  # None: no limit found
    assert 1 <= exact <= PROBE_LIMIT
    assert exact == longest_exact_run(hybrid.context, list(range(20, 30)), list(range(30, 38)))
    if exact < PROBE_LIMIT:
        configured = hybrid.settings.spec_max_draft
        assert hybrid.speculation.controller.max_length == min(configured, exact - 1)


def test_greedy_output_with_speculation_on_is_what_it_writes_with_it_off(
    hybrid: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = hybrid.service.text_prompt(PROMPT_WORDS)
    controller = hybrid.speculation.controller
    if controller.max_length == 0:
        pytest.skip("no batch of 2 tokens computes here as 2 one-token steps do: no drafts")
    off = answer_then_draft_half_right(hybrid, prompt, monkeypatch, 48)
    replayed = controller.replayed_tokens
    exported = metrics.REGISTRY.get_sample_value("reame_rollback_replayed_tokens_total") or 0.0
    on = greedy_tokens(hybrid, prompt, "on")
    assert on == off
    stats = controller.drafters[HalfRight.name]
    assert stats.proposed > stats.accepted > 0  # drafts kept and drafts refused...
    assert controller.uses_checkpoints and controller.replayed_tokens > replayed  # ...rolled back
    now = metrics.REGISTRY.get_sample_value("reame_rollback_replayed_tokens_total")
    assert now == exported + controller.replayed_tokens - replayed


def test_a_prompt_restored_from_a_snapshot_continues_as_a_cold_one(tiny_path: Path) -> None:
    settings = small_settings(tiny_path, spec="off", kv_type="q8_0")
    system = "You answer in one word. " + "alpha beta gamma delta " * 30
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Why?"}]

    def run(runtime: Runtime) -> tuple[list[int], int]:
        service = runtime.service
        prompt = service.chat.prompt(messages)
        params = service.sampling(temperature=0.0, max_tokens=24, speculation="off")
        job = Job(prompt, params, marks=service.chat.marks(messages, prompt))
        tokens, cached = [], 0
        for event in service.stream_job(job):
            if hasattr(event, "token"):
                tokens.append(event.token)
            else:
                cached = event.num_cached_tokens
        return tokens, cached

    with Runtime(settings) as first:
        cold, cached = run(first)
        assert cached == 0
        first.cache.flush()  # type: ignore[union-attr]
    with Runtime(settings) as second:  # the same state directory: its snapshots on disk
        warm, cached = run(second)
    assert warm == cold and cached > 0


def test_a_sessions_second_turn_goes_on_from_its_state(hybrid: Runtime) -> None:
    from reame.cache.prefix_reuse import SessionKey

    service, key = hybrid.service, SessionKey("", "hybrid-chat")
    first = service.text_prompt("Tell me a story about " + "a cat and a dog " * 10)
    params = service.sampling(temperature=0.0, max_tokens=16, speculation="off")

    async def turn(prompt: list[int]) -> tuple[list[int], int]:
        out, cached = [], 0
        async for event in service.astream_job(Job(prompt, params, session=key)):
            if hasattr(event, "token"):
                out.append(event.token)
            else:
                cached = event.num_cached_tokens
        return out, cached

    answer, _ = asyncio.run(turn(first))
    second = [*first, *answer, *service.text_prompt(" And then?")]
    again, cached = asyncio.run(turn(second))
    assert cached >= len(first)  # the first turn's state, pinned for the session
    assert again == greedy_tokens(hybrid, second, "off", 16)


def test_a_conclave_of_three_forks_the_prompt_once_and_each_writes_alone(hybrid: Runtime) -> None:
    prompt = hybrid.service.text_prompt(PROMPT_WORDS)
    params = hybrid.service.sampling(temperature=0.9, seed=7, max_tokens=12, speculation="off")
    verdict = asyncio.run(convene(hybrid.service, Job(prompt, params), 3, "line", False))
    alone = [
        hybrid.service.generate(prompt, params.model_copy(update={"seed": 7 + k}))[1]
        for k in range(3)
    ]
    assert [c.text for c in verdict.candidates] == alone


def test_the_same_prompt_again_restores_all_but_its_last_token(hybrid: Runtime) -> None:
    # NOTE: the whole prompt's state could not be cut back to the point the next request needs
    # (its last token is computed again for its logits): it is snapshotted one token short
    prompt = hybrid.service.text_prompt("A long question about " + "rivers and hills " * 20)
    params = hybrid.service.sampling(temperature=0.0, max_tokens=8, speculation="off")
    first = hybrid.service.generate(prompt, params)
    second = hybrid.service.generate(prompt, params)
    assert second[0] == first[0]
    assert second[2].num_cached_tokens == len(prompt) - 1


def test_a_refused_rollback_is_computed_again_not_served(
    hybrid: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = hybrid.service.text_prompt(PROMPT_WORDS)
    off = answer_then_draft_half_right(hybrid, prompt, monkeypatch)
    refused: list[int] = []

    def refuse(seq_id: int, checkpoint: bytearray, position: int) -> bool:
        refused.append(position)
        return False  # as llama.cpp refusing the checkpoint: memory_seq_rm is not trusted

    monkeypatch.setattr(hybrid.context, "rollback", refuse)
    assert greedy_tokens(hybrid, prompt, "on", 32) == off
    assert refused  # it was asked, refused, and the sequence computed again from its start


def test_a_refused_cut_of_the_kv_cache_is_computed_again_not_served(
    smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama_memory_seq_rm refusing every cut short of a whole sequence, on a model whose memory
    could be cut: refused drafts and a resident prompt are then computed again, and the answers
    are the model's own."""
    settings = small_settings(smollm2_path, spec="on", kv_type="q8_0")
    with Runtime(settings) as runtime:
        prompt = runtime.service.text_prompt(PROMPT_WORDS)
        off = answer_then_draft_half_right(runtime, prompt, monkeypatch)
        context, refused = runtime.context, []
        cut = context.remove

        def refuse(seq_id: int, start: int = 0, end: int = -1) -> bool:
            if start > 0:
                refused.append(start)
                return False
            return cut(seq_id, start, end)

        monkeypatch.setattr(context, "remove", refuse)
        replayed = runtime.speculation.controller.replayed_tokens
        assert greedy_tokens(runtime, prompt, "on", 32) == off  # drafts refused, then cut
        assert greedy_tokens(runtime, prompt, "off", 32) == off  # the resident prompt, cut
        assert refused and runtime.speculation.controller.replayed_tokens > replayed
