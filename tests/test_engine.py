"""The engine on the real SmolLM2-135M-Instruct: nothing of llama.cpp is mocked."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

import pytest

from conftest import small_settings
from reame.engine.request import FinishEvent, GenerationRequest, TokenEvent
from reame.errors import InvalidRequestError
from reame.llama.context import Context, ContextShape
from reame.runtime import Runtime
from reame_bench.plain_loop import plain_greedy_loop
from step_sizes import steps_with_more_than

pytestmark = pytest.mark.model

QUESTIONS = [
    "Write a story about a cat.",
    "Explain gravity to a child.",
    "List five fruits.",
    "What is Python?",
    "Describe the sea at night.",
]


def prompt(runtime: Runtime, question: str) -> list[int]:
    return runtime.service.chat.prompt([{"role": "user", "content": question}])


def plain_tokens(runtime: Runtime, tokens: list[int], max_tokens: int) -> list[int]:
    """The plain loop's greedy tokens, less a final end-of-generation token (never emitted)."""
    shape = ContextShape(runtime.tuned.context_length, runtime.tuned.batch_size, 1, 2)
    out = plain_greedy_loop(runtime.model, tokens, max_tokens, shape).tokens
    return out[:-1] if out and runtime.model.is_end_of_generation(out[-1]) else out


def greedy(runtime: Runtime, **extra: object):
    return runtime.service.sampling(temperature=0.0, **extra)


def test_greedy_output_equals_the_plain_loop(smollm2: Runtime) -> None:
    tokens = prompt(smollm2, QUESTIONS[0])
    got, text, finish = smollm2.service.generate(tokens, greedy(smollm2, max_tokens=80))
    assert got == plain_tokens(smollm2, tokens, 80)
    assert text.strip()
    assert finish.num_prompt_tokens == len(tokens)


def test_greedy_output_is_the_same_while_four_others_share_its_batches(smollm2: Runtime) -> None:
    prompts = [prompt(smollm2, q) for q in QUESTIONS]
    expected = [plain_tokens(smollm2, p, 60) for p in prompts]
    results: dict[int, list[int]] = {}

    def run(i: int) -> None:
        results[i] = smollm2.service.generate(prompts[i], greedy(smollm2, max_tokens=60))[0]

    before = steps_with_more_than(4)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert steps_with_more_than(4) > before  # all five shared a step
    assert [results[i] for i in range(len(prompts))] == expected


def test_a_request_joins_a_running_batch(smollm2: Runtime) -> None:
    long_one = smollm2.service.stream(
        prompt(smollm2, QUESTIONS[0]), greedy(smollm2, max_tokens=120)
    )
    next(long_one)  # the first request is decoding now
    before = steps_with_more_than(1)
    tokens, _, _ = smollm2.service.generate(
        prompt(smollm2, QUESTIONS[2]), greedy(smollm2, max_tokens=10)
    )
    assert len(tokens) >= 1
    assert steps_with_more_than(1) > before
    long_one.close()


def test_max_tokens_ends_with_length(smollm2: Runtime) -> None:
    tokens, _, finish = smollm2.service.generate(
        prompt(smollm2, QUESTIONS[0]), greedy(smollm2, max_tokens=5)
    )
    assert len(tokens) == 5
    assert (finish.reason, finish.num_completion_tokens) == ("length", 5)


def test_the_end_of_generation_token_ends_with_stop(smollm2: Runtime) -> None:
    tokens, text, finish = smollm2.service.generate(
        prompt(smollm2, "Say yes."), greedy(smollm2, max_tokens=200)
    )
    assert finish.reason == "stop"
    assert len(tokens) < 200
    assert "<|im_end|>" not in text


def test_a_stop_string_cuts_the_text_before_it(smollm2: Runtime) -> None:
    tokens = prompt(smollm2, QUESTIONS[2])
    _, full, _ = smollm2.service.generate(tokens, greedy(smollm2, max_tokens=40))
    stop = full.strip().split()[2]
    _, text, finish = smollm2.service.generate(tokens, greedy(smollm2, max_tokens=40, stop=(stop,)))
    assert finish.reason == "stop"
    assert stop not in text
    assert text == full[: full.find(stop)]


def test_a_seed_reproduces_sampled_output_and_another_seed_does_not(smollm2: Runtime) -> None:
    tokens = prompt(smollm2, QUESTIONS[0])

    def sample(seed: int) -> list[int]:
        params = smollm2.service.sampling(
            temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=seed, max_tokens=30
        )
        return smollm2.service.generate(tokens, params)[0]

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)


def test_logprobs_come_with_each_token(smollm2: Runtime) -> None:
    params = greedy(smollm2, max_tokens=5, logprobs=True, top_logprobs=3)
    events = list(smollm2.service.stream(prompt(smollm2, QUESTIONS[1]), params))
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    assert len(tokens) == 5
    for e in tokens:
        assert e.logprob is not None and e.logprob <= 0.0
        assert len(e.top_logprobs) == 3
        assert e.top_logprobs[0][0] == e.token  # greedy picks the most likely token


def test_closing_a_stream_aborts_it_and_frees_its_sequence(smollm2: Runtime) -> None:
    stream = smollm2.service.stream(prompt(smollm2, QUESTIONS[0]), greedy(smollm2, max_tokens=500))
    next(stream)
    stream.close()
    deadline = time.monotonic() + 2.0
    while smollm2.engine.num_running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert smollm2.engine.num_running == 0


def test_a_prompt_longer_than_the_context_is_refused(smollm2: Runtime) -> None:
    too_long = smollm2.service.text_prompt("word " * 1100)
    with pytest.raises(InvalidRequestError, match=r"the prompt is \d+ tokens .* holds 1024"):
        smollm2.service.generate(too_long, greedy(smollm2))


def test_a_logit_bias_outside_the_vocabulary_is_refused(smollm2: Runtime) -> None:
    params = greedy(smollm2, logit_bias={10**6: 1.0})
    with pytest.raises(InvalidRequestError, match="out of range"):
        smollm2.engine.submit(GenerationRequest([1, 2, 3], params), lambda e: None)


def test_out_of_range_sampling_values_are_refused(smollm2: Runtime) -> None:
    with pytest.raises(InvalidRequestError, match="temperature"):
        smollm2.service.sampling(temperature=9.0)


def test_the_prompt_runs_up_to_the_context_then_stops_with_length(smollm2_path: Path) -> None:
    with Runtime(small_settings(smollm2_path, context_length=128, parallel=1)) as runtime:
        tokens = runtime.service.text_prompt("one two three four " * 40)[:120]
        got, _, finish = runtime.service.generate(
            tokens, runtime.service.sampling(temperature=0.0, max_tokens=50, ignore_eos=True)
        )
    assert len(tokens) == 120
    assert (len(got), finish.reason) == (8, "length")


def test_only_the_engine_thread_decodes(
    smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libgomp gives each decoding thread a team; a second team slows the engine's steps (the
    start-up probe ran on the caller's thread and made 1-token steps 19 ms instead of 11)."""
    callers: set[str] = set()
    decode = Context.decode

    def recorded(self: Context, *args: Sequence[int]) -> None:
        callers.add(threading.current_thread().name)
        decode(self, *args)

    monkeypatch.setattr(Context, "decode", recorded)
    with Runtime(small_settings(smollm2_path, parallel=2, spec_exact=True)) as runtime:
        runtime.service.generate(
            runtime.service.text_prompt("one two three four"),
            runtime.service.sampling(temperature=0.0, max_tokens=8),
        )
    assert callers == {"reame-engine"}


def test_a_chat_call_on_a_model_without_a_template_is_a_clear_error(gemma_path: Path) -> None:
    with Runtime(small_settings(gemma_path, parallel=1)) as runtime:
        with pytest.raises(InvalidRequestError, match="has no chat template"):
            runtime.service.chat.prompt([{"role": "user", "content": "hi"}])
        tokens, text, finish = runtime.service.generate(
            runtime.service.text_prompt("The capital of France is"),
            runtime.service.sampling(temperature=0.0, max_tokens=8),
        )
    assert finish.reason in ("stop", "length")
    assert tokens


def test_a_finish_event_ends_every_stream(smollm2: Runtime) -> None:
    events = list(
        smollm2.service.stream(prompt(smollm2, QUESTIONS[3]), greedy(smollm2, max_tokens=3))
    )
    assert isinstance(events[-1], FinishEvent)
    assert sum(isinstance(e, FinishEvent) for e in events) == 1


class _StepWatcher:
    """Records, at each wake-up, how many events the engine had emitted by then."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self.seen_at_wake: list[int] = []
        self.done = threading.Event()

    def sink(self, event: object) -> None:
        self.events.append(event)
        if isinstance(event, FinishEvent):
            self.done.set()

    def wake(self) -> None:
        self.seen_at_wake.append(len(self.events))


def test_consumers_are_woken_once_per_step_after_its_events_and_weakly_held(
    smollm2: Runtime,
) -> None:
    watcher = _StepWatcher()
    smollm2.engine.add_wake_hook(watcher.wake)
    # NOTE: one token a step: no drafts
    params = greedy(smollm2, max_tokens=6, ignore_eos=True, speculation="off")
    request = GenerationRequest(prompt(smollm2, QUESTIONS[0]), params)
    smollm2.engine.submit(request, watcher.sink)
    assert watcher.done.wait(30)
    time.sleep(0.2)  # the wake-up as the engine goes idle
    # one wake-up before each decode (the prompt, then 5 tokens) and one going idle; each
    # sees every event of the steps before it, and the last sees the finish
    assert watcher.seen_at_wake[-7:] == [0, 1, 2, 3, 4, 5, 7]
    ref = weakref.ref(watcher)
    del watcher, request
    gc.collect()
    assert ref() is None  # the engine did not keep it alive
    keep = _StepWatcher()
    smollm2.engine.add_wake_hook(keep.wake)  # adding prunes the dead ones
    assert [r() for r in smollm2.engine._wake_hooks] == [keep.wake]
