"""Warm-ahead prefill on the real SmolLM2: the next turn starts from the answer's closing tokens
computed while the engine was idle, answers as it would without them, takes the warming
sequence over when it comes first, and a request arriving during warm-ahead work waits one step
at most. The pure parts without a model."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import pytest

from conftest import small_settings
from reame import metrics
from reame.cache.prefix_reuse import SessionKey
from reame.engine.request import FinishEvent, GenerationRequest
from reame.engine.sequence import SeqState
from reame.engine.warm_ahead import WarmGauge, warm_tail
from reame.runtime import Runtime
from reame.service import Job
from reame_bench.workloads import filler_text

SYSTEM = "You answer in one short sentence. " + filler_text(seed=5, num_words=200)
QUESTIONS = ("Name a colour.", "Name a fruit.", "And another one?")


def test_the_tail_is_the_uncomputed_answer_without_its_end_of_turn_then_the_closing() -> None:
    computed, taken, closing = [1, 2, 3], [1, 2, 3, 9], [7, 8]
    assert warm_tail(computed, taken, closing, ends_turn=True) == [7, 8]
    assert warm_tail(computed, taken, closing, ends_turn=False) == [9, 7, 8]
    assert warm_tail(computed, taken, (), ends_turn=False) is None
    assert warm_tail(computed, computed, closing, ends_turn=True) is None


def test_warm_ahead_pays_until_measured_then_while_the_gaps_outlast_its_steps() -> None:
    gauge = WarmGauge()
    assert gauge.pays
    gauge.spent(0.040)
    for k in range(WarmGauge.WINDOW):
        gauge.idle(10.0 * k)
        gauge.idle(10.0 * k + 0.004)  # still idle: the gap runs from the first
        gauge.arrived(10.0 * k + 0.005)  # a client that asks again at once
    assert not gauge.pays
    for k in range(WarmGauge.WINDOW // 2 + 1):
        gauge.idle(100.0 + k)
        gauge.arrived(100.5 + k)  # a person typing
    assert gauge.pays


def test_a_request_that_arrives_while_another_runs_leaves_no_gap() -> None:
    gauge = WarmGauge()
    gauge.spent(0.040)
    for _ in range(WarmGauge.WINDOW):
        gauge.arrived(5.0)  # never idle between them
    assert not gauge.pays


def warm_count(outcome: str) -> float:
    value = metrics.REGISTRY.get_sample_value("reame_warm_ahead_total", {"outcome": outcome})
    return value or 0.0


def conversation(
    runtime: Runtime, session: str, questions: tuple[str, ...] = QUESTIONS, pause: bool = True
) -> list[tuple[list[int], int]]:
    """Turns of one session through the service, each 0.2 s after the engine went idle (its
    warm-ahead work done), or without `pause` as soon as the answer before it ended: each
    answer's tokens and its cached prompt tokens."""
    service = runtime.service
    messages = [{"role": "system", "content": SYSTEM}]
    out = []
    for question in questions:
        messages.append({"role": "user", "content": question})
        prompt = service.chat.prompt(messages)
        job = Job(
            prompt,
            service.sampling(temperature=0.0, max_tokens=16),
            session=SessionKey("", session),
            marks=service.chat.marks(messages, prompt),
            warm_ahead=service.chat.closing(),
        )
        tokens, text, cached = [], [], 0
        for event in service.stream_job(job):
            if isinstance(event, FinishEvent):
                cached = event.num_cached_tokens
                text.append(event.text)
            else:
                tokens.append(event.token)
                text.append(event.text)
        out.append((tokens, cached))
        messages.append({"role": "assistant", "content": "".join(text)})
        if pause:  # NOTE: past the warm-ahead work, as a person typing: the gauge sees gaps
            _wait_idle(runtime)  # longer than that work, so it keeps warming ahead
            threading.Event().wait(0.2)
    return out


def _wait_idle(runtime: Runtime) -> None:
    scheduler = runtime.engine.scheduler
    for _ in range(400):
        if not scheduler.warming and not scheduler.running:
            return
        threading.Event().wait(0.01)
    raise AssertionError("the engine never went idle")


@pytest.mark.model
def test_the_next_turn_starts_past_the_closing_and_answers_as_without_it(
    smollm2_path: Path,
) -> None:
    settings = {"spec": "off", "prefix_cache_disk": False}
    with Runtime(small_settings(smollm2_path, warm_ahead=False, **settings)) as runtime:
        assert runtime.service.chat.closing() == ()
        plain = conversation(runtime, "plain")
    kept = warm_count("kept")
    with Runtime(small_settings(smollm2_path, **settings)) as runtime:
        closing = runtime.service.chat.closing()
        assert closing  # <|im_end|>, a newline, <|im_start|>user and its newline
        warmed = conversation(runtime, "warmed")
    assert warm_count("kept") >= kept + len(QUESTIONS)
    assert [t for t, _ in warmed] == [t for t, _ in plain]
    for turn in (1, 2):
        # the closing is not computed again (the answer's end-of-turn token is in it)
        assert warmed[turn][1] >= plain[turn][1] + len(closing) - 1, (warmed, plain)


def _chat_tokens(runtime: Runtime, question: str) -> tuple[list[int], tuple[int, ...]]:
    service = runtime.service
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    prompt = service.chat.prompt(messages)
    return prompt, service.chat.closing()


def _follow_up(runtime: Runtime, tokens: list[int]) -> GenerationRequest:
    service = runtime.service
    more = service.model.tokenize("Another question?", False)
    return GenerationRequest(tokens + more, service.sampling(temperature=0.0, max_tokens=4))


def _finish(events: queue.SimpleQueue) -> FinishEvent:
    while not isinstance(event := events.get(timeout=60), FinishEvent):
        pass
    return event


@pytest.mark.model
def test_a_request_arriving_during_warm_ahead_waits_one_step_at_most(smollm2_path: Path) -> None:
    """The second request is submitted while a warm-ahead step runs (from inside the step, so
    it is there before the step ends): the very next step computes it, from the KV the warm
    step left in the sequence (the step is not stopped: the request goes on from it)."""
    with Runtime(small_settings(smollm2_path, spec="off", prefix_cache_disk=False)) as runtime:
        engine, service = runtime.engine, runtime.service
        prompt, closing = _chat_tokens(runtime, QUESTIONS[0])
        plans: list[tuple[bool, set[str]]] = []
        second: list[GenerationRequest] = []
        events: queue.SimpleQueue = queue.SimpleQueue()
        real_run = engine.runner.run

        def run(plan, interrupt=None):
            is_warm = any(p.seq.state is SeqState.WARMING for p in plan.parts)
            plans.append((is_warm, {p.seq.request.request_id for p in plan.parts}))
            if is_warm and not second:
                first = next(p.seq for p in plan.parts if p.seq.state is SeqState.WARMING)
                second.append(_follow_up(runtime, first.tokens))
                engine.submit(second[0], events.put)
            return real_run(plan, interrupt)

        engine.runner.run = run
        job = Job(prompt, service.sampling(temperature=0.0, max_tokens=8), warm_ahead=closing)
        list(service.stream_job(job))
        event = _finish(events)
        warm_steps = [i for i, (is_warm, _) in enumerate(plans) if is_warm]
        assert warm_steps, "no warm-ahead step ran"
        request_id = second[0].request_id
        first_of_second = next(i for i, (_, ids) in enumerate(plans) if request_id in ids)
        assert first_of_second == warm_steps[0] + 1, plans
        assert event.num_cached_tokens >= len(second[0].prompt) - len("Another question?")


@pytest.mark.model
def test_a_request_that_comes_first_takes_the_warming_sequence_over(smollm2_path: Path) -> None:
    """Submitted as the answer's finish goes out (from its sink, on the engine thread), the
    next turn is admitted before any warm-ahead step and goes on in the warming sequence."""
    with Runtime(small_settings(smollm2_path, spec="off", prefix_cache_disk=False)) as runtime:
        engine, service = runtime.engine, runtime.service
        prompt, closing = _chat_tokens(runtime, QUESTIONS[0])
        events: queue.SimpleQueue = queue.SimpleQueue()
        answer: list[int] = []
        second: list[GenerationRequest] = []

        def sink(event) -> None:
            if isinstance(event, FinishEvent):
                second.append(_follow_up(runtime, [*prompt, *answer[:-1], *closing]))
                engine.submit(second[0], events.put)
            else:
                answer.append(event.token)

        job = Job(prompt, service.sampling(temperature=0.0, max_tokens=8), warm_ahead=closing)
        taken = warm_count("taken_over")
        engine.submit(service.request(job), sink)
        event = _finish(events)
        assert warm_count("taken_over") == taken + 1
        # the first prompt and the answer it computed, not copied, not computed again
        assert event.num_cached_tokens >= len(prompt) + len(answer) - 1


@pytest.mark.model
def test_requests_back_to_back_turn_warm_ahead_off_and_answer_as_with_it(
    smollm2_path: Path,
) -> None:
    """Each turn is sent as soon as the one before ended: once the gauge has seen a few such
    gaps and what a warm step costs, answers keep their state at once, as without warm-ahead
    (counted as skipped), and the conversation answers as one that pauses."""
    questions = tuple(f"{q} {k}" for k in range(3) for q in QUESTIONS)
    settings = {"spec": "off", "prefix_cache_disk": False}
    with Runtime(small_settings(smollm2_path, **settings)) as runtime:
        paused = conversation(runtime, "paused", questions)
    skipped = warm_count("skipped")
    with Runtime(small_settings(smollm2_path, **settings)) as runtime:
        hurried = conversation(runtime, "hurried", questions, pause=False)
        assert runtime.engine.update.warm_gauge.cost > 0.0  # the first turns warmed ahead
    assert warm_count("skipped") >= skipped + len(questions) // 2
    assert [t for t, _ in hurried] == [t for t, _ in paused]


@pytest.mark.model
def test_after_a_restart_the_snapshots_on_disk_are_in_ram_before_the_first_request(
    smollm2_path: Path, tmp_path: Path
) -> None:
    settings = small_settings(smollm2_path, spec="off", state_dir=tmp_path)
    with Runtime(settings) as runtime:
        conversation(runtime, "before")
        stored = len(runtime.cache.ram)
    # NOTE: each turn's state holds the turns before it: RAM keeps the longest, the disk all of
    # them, and preload does not read what a state it loaded serves
    assert 1 <= stored < len(list(tmp_path.rglob("*.kvs")))
    preloaded = metrics.REGISTRY.get_sample_value("reame_prefix_cache_preloaded_total") or 0.0
    with Runtime(small_settings(smollm2_path, spec="off", state_dir=tmp_path)) as runtime:
        runtime.preload.wait(60)
        assert len(runtime.cache.ram) == stored
        assert metrics.REGISTRY.get_sample_value("reame_prefix_cache_preloaded_total") == (
            preloaded + stored
        )
        disk_hits = metrics.REGISTRY.get_sample_value(
            "reame_prefix_cache_lookups_total", {"result": "disk"}
        )
        conversation(runtime, "after")
        assert (
            metrics.REGISTRY.get_sample_value(
                "reame_prefix_cache_lookups_total", {"result": "disk"}
            )
            == disk_hits
        )
