"""The engine thread against a fake context (tests/fake_llama.py), in milliseconds: admission,
chunked prefill, a draft run rolled back, an abort mid-way, Conclave forks (also one larger than
the free sequences), snapshot points. Every output must be what the fake model writes alone."""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Iterator

import pytest

from fake_llama import FakeContext, FakeModel, reference
from reame import metrics
from reame.engine.engine import Engine
from reame.engine.outbox import Kept
from reame.engine.request import Event, Finish, FinishEvent, GenerationRequest, TokenEvent
from reame.llama.context import ContextShape
from reame.sampling import SamplingParams
from reame.saved_state import SavedState
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation

CONTEXT_LENGTH = 256


class Run:
    """One request's events, and a way to wait for its end."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.done = threading.Event()

    def sink(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, FinishEvent):
            self.done.set()

    @property
    def tokens(self) -> list[int]:
        return [e.token for e in self.events if isinstance(e, TokenEvent)]

    def wait(self) -> list[int]:
        """The tokens, once the request has finished."""
        assert self.done.wait(10), "the request never finished"
        return self.tokens

    @property
    def finish(self) -> FinishEvent:
        assert self.done.wait(10), "the request never finished"
        last = self.events[-1]
        assert isinstance(last, FinishEvent)
        return last


def make_engine(
    sequences: int = 2,
    batch: int = 32,
    step_seconds: float = 0.0,
    can_cut: bool = True,
    **kwargs: object,
) -> tuple[Engine, FakeContext]:
    shape = ContextShape(sequences * CONTEXT_LENGTH, batch, sequences, 1)
    context = FakeContext(shape, step_seconds, can_cut)
    engine = Engine(FakeModel(), context, CONTEXT_LENGTH, **kwargs)  # type: ignore[arg-type]
    engine.start()
    return engine, context


def decode_started(context: FakeContext) -> threading.Event:
    """Set as the context's next decode begins."""
    started = threading.Event()
    decode = context.decode

    def signalled_decode(*args: object, **kwargs: object) -> None:
        started.set()
        decode(*args, **kwargs)  # type: ignore[arg-type]

    context.decode = signalled_decode  # type: ignore[method-assign]
    return started


@pytest.fixture
def engine_and_context() -> Iterator[tuple[Engine, FakeContext]]:
    engine, context = make_engine()
    yield engine, context
    assert engine.close()


def greedy(max_tokens: int, **extra: object) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, **extra)


def submit(engine: Engine, prompt: list[int], params: SamplingParams) -> Run:
    run = Run()
    engine.submit(GenerationRequest(prompt, params), run.sink)
    return run


def test_more_requests_than_sequences_wait_and_each_writes_its_own_tokens(
    engine_and_context: tuple[Engine, FakeContext],
) -> None:
    engine, context = engine_and_context
    prompts = [[5 + i, 9, 11 + i] for i in range(5)]
    runs = [submit(engine, p, greedy(12)) for p in prompts]
    for prompt, run in zip(prompts, runs, strict=True):
        assert run.finish.reason == "length"
        assert run.wait() == reference(prompt, 12)
    assert max(len({seq for seq, _, _ in b}) for b in context.batches) == 2  # never more


def test_a_prompt_longer_than_the_budget_is_computed_in_chunks(
    engine_and_context: tuple[Engine, FakeContext],
) -> None:
    engine, context = engine_and_context
    prompt = [(i * 5) % 60 + 2 for i in range(100)]  # 100 tokens, a budget of 32
    run = submit(engine, prompt, greedy(8))
    assert run.wait() == reference(prompt, 8) and run.finish.num_prompt_tokens == 100
    chunks = [len(b) for b in context.batches[:4]]
    assert chunks == [32, 32, 32, 4]


def test_an_abort_ends_a_running_and_a_waiting_request_and_frees_their_places() -> None:
    engine, _ = make_engine(step_seconds=0.002)
    requests = [GenerationRequest([3 + k, 4, 5], greedy(200)) for k in range(3)]
    runs = [Run() for _ in requests]
    for request, run in zip(requests, runs, strict=True):
        engine.submit(request, run.sink)
    deadline = time.monotonic() + 10
    while len(runs[0].tokens) < 3:  # the first is running, the third waits for a sequence
        assert time.monotonic() < deadline
        time.sleep(0.001)
    engine.abort(requests[0].request_id)
    engine.abort(requests[2].request_id)
    assert runs[0].finish.reason == "abort" and runs[2].finish.reason == "abort"
    assert runs[0].tokens == reference(requests[0].prompt, 200)[: len(runs[0].tokens)]
    assert runs[1].finish.reason == "length"
    assert runs[1].wait() == reference(requests[1].prompt, 200)
    assert engine.num_free_places == engine._max_in_flight  # every place given back
    assert engine.close()


def test_drafts_the_model_refuses_are_rolled_back() -> None:
    engine, context = make_engine(speculation=Speculation(SpecController("on", 8)))
    try:
        prompt = [7, 8, 9, 10, 7, 8, 9, 10, 7, 8, 9, 10, 7, 8]  # the lookup proposes 9, 10, ...
        run = submit(engine, prompt, greedy(30))
        assert run.wait() == reference(prompt, 30)
        stats = engine._spec.controller.drafters["context"]  # type: ignore[union-attr]
        assert stats.proposed > stats.accepted  # some drafts were refused and rolled back
        assert max(len(b) for b in context.batches[1:]) > 1  # verified in batches
    finally:
        assert engine.close()


@pytest.mark.parametrize("candidates", [2, 5], ids=["fits", "larger-than-the-sequences"])
def test_a_group_computes_its_prompt_once_and_each_candidate_writes_alone(candidates: int) -> None:
    engine, context = make_engine(sequences=2)
    try:
        prompt = [40, 41, 42, 43, 44, 45]
        runs = [Run() for _ in range(candidates)]
        requests = [GenerationRequest(prompt, greedy(10 + k)) for k in range(candidates)]
        engine.submit_group(requests, [r.sink for r in runs])
        for k, run in enumerate(runs):
            assert run.wait() == reference(prompt, 10 + k)
            cached = run.finish.num_cached_tokens
            assert cached == (0 if k == 0 else len(prompt))
        prompt_batches = [b for b in context.batches if any(t == 40 for _, _, t in b)]
        assert len(prompt_batches) == 1  # one prefill, whatever the group's size
    finally:
        assert engine.close()


def test_snapshots_are_taken_exactly_at_their_points() -> None:
    taken: list[SavedState] = []
    engine, _ = make_engine(on_state=lambda kept: taken.append(kept.state), takes_snapshots=True)
    try:
        prompt = list(range(2, 60))
        request = GenerationRequest(prompt, greedy(4), snapshot_at=(16, 40))
        run = Run()
        engine.submit(request, run.sink)
        assert run.wait() == reference(prompt, 4)
        assert [s.tokens for s in taken] == [tuple(prompt[:16]), tuple(prompt[:40])]
        # NOTE: the state held exactly that prefix when it was taken
        assert [pickle.loads(bytes(s.data)) for s in taken] == [prompt[:16], prompt[:40]]
    finally:
        assert engine.close()


def test_a_cut_ends_a_chunk_there_and_reads_no_state() -> None:
    """Where an answer starts (cut_at): the prompt's chunks end there, as at a snapshot point,
    but no state is read (the history computed ahead goes on from the resident KV)."""
    taken: list[SavedState] = []
    engine, context = make_engine(
        on_state=lambda kept: taken.append(kept.state), takes_snapshots=True
    )
    try:
        prompt = list(range(2, 60))
        request = GenerationRequest(prompt, greedy(4), snapshot_at=(16,), cut_at=(16, 55))
        run = Run()
        engine.submit(request, run.sink)
        assert run.wait() == reference(prompt, 4)
        assert [len(b) for b in context.batches[:4]] == [16, 32, 7, 3]  # a budget of 32
        assert [s.tokens for s in taken] == [tuple(prompt[:16])]  # a snapshot where both ask
    finally:
        assert engine.close()


class Consumer:
    """A consumer woken by the engine, as the event loop is: what it had been handed by then."""

    def __init__(self, run: Run, log: list[str]) -> None:
        self.run, self.log = run, log

    def wake(self) -> None:
        if self.run.tokens and "woken after the first token" not in self.log:
            self.log.append("woken after the first token")


def test_the_prompts_state_is_read_after_its_first_token_is_handed_out() -> None:
    log: list[str] = []
    engine, context = make_engine(on_state=lambda kept: log.append("kept"), takes_snapshots=True)
    read = context.save_state

    def logged_read(seq_id: int) -> bytearray:
        log.append("read")
        return read(seq_id)

    context.save_state = logged_read  # type: ignore[method-assign]
    try:
        prompt = list(range(2, 40))
        run = Run()
        consumer = Consumer(run, log)
        engine.add_wake_hook(consumer.wake)
        engine.submit(GenerationRequest(prompt, greedy(4), snapshot_at=(len(prompt),)), run.sink)
        assert run.wait() == reference(prompt, 4)
        assert log == ["woken after the first token", "read", "kept"]
    finally:
        assert engine.close()


def test_an_answers_state_with_nothing_to_warm_is_read_after_its_finish_is_handed_out() -> None:
    log: list[str] = []
    kept: list[SavedState] = []

    def keep(state: Kept) -> None:
        log.append("kept")
        kept.append(state.state)

    engine, context = make_engine(on_state=keep)
    read = context.save_state

    def logged_read(seq_id: int) -> bytearray:
        log.append("read")
        return read(seq_id)

    context.save_state = logged_read  # type: ignore[method-assign]
    gauge = engine.update.warm_gauge
    gauge.spent(1.0)  # a warm step costs a second, and no request left a gap: it does not pay
    for _ in range(gauge.WINDOW):
        gauge.arrived(time.monotonic())
    try:
        prompt = list(range(2, 40))
        run = Run()

        class Consumer:
            def wake(self) -> None:
                if run.done.is_set() and "woken after the finish" not in log:
                    log.append("woken after the finish")

        consumer = Consumer()
        engine.add_wake_hook(consumer.wake)
        request = GenerationRequest(prompt, greedy(4), keep_state=True, warm_ahead=(7, 8))
        engine.submit(request, run.sink)
        answer = run.wait()
        assert engine.close()
        assert log == ["woken after the finish", "read", "kept"]
        computed = prompt + answer[:-1]  # the last token was never computed
        assert kept[0].tokens == tuple(computed)
        assert pickle.loads(bytes(kept[0].data)) == computed
    finally:
        engine.close()


def test_the_gauges_show_an_idle_engine_once_its_last_request_ended() -> None:
    """The last answer keeps its state after its finish (nothing to warm): no step follows."""
    engine, _ = make_engine()
    gauge = engine.update.warm_gauge
    gauge.spent(1.0)
    for _ in range(gauge.WINDOW):
        gauge.arrived(time.monotonic())
    try:
        run = Run()
        request = GenerationRequest(
            list(range(2, 20)),
            greedy(4),
            keep_state=True,
            warm_ahead=(7,),
        )
        engine.submit(request, run.sink)
        run.wait()
        deadline = time.monotonic() + 2
        while metrics.RUNNING._value.get() != 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (metrics.RUNNING._value.get(), metrics.WAITING._value.get()) == (0, 0)
    finally:
        assert engine.close()


@pytest.mark.parametrize("candidates", [2, 3], ids=["fits", "larger-than-the-sequences"])
def test_a_groups_candidates_keep_the_chunks_that_computed_their_prompt(candidates: int) -> None:
    """A candidate's KV is a copy of the group's prompt: a later request reuses it as those
    chunks computed it (engine/exact_reuse.py), not as chunks it does not know (before, a
    candidate's states held none: reused only up to a chunk end)."""
    taken: list[SavedState] = []
    engine, _ = make_engine(on_state=lambda kept: taken.append(kept.state), takes_snapshots=True)
    try:
        prompt = [(i * 5) % 60 + 2 for i in range(40)]
        runs = [Run() for _ in range(candidates)]
        requests = [
            GenerationRequest(prompt, greedy(6 + k), keep_state=True) for k in range(candidates)
        ]
        engine.submit_group(requests, [r.sink for r in runs])
        for k, run in enumerate(runs):
            assert run.wait() == reference(prompt, 6 + k)
        answers = [s for s in taken if len(s.tokens) > len(prompt)]
        assert len(answers) == candidates
        assert [s.chunks for s in answers] == [((0, 32), (32, 40))] * candidates  # budget 32
    finally:
        assert engine.close()


def test_idle_time_works_state_is_read_after_the_first_token_of_a_request_that_came_meanwhile() -> (
    None
):
    # a next turn arriving during idle-time work waited for that work's state to be read too:
    # 190 ms of its first token at the Qwen3 1.7B shape (where memory cannot be cut, the step
    # is not stopped for it)
    log: list[str] = []
    engine, context = make_engine(
        on_state=lambda kept: log.append("kept"), step_seconds=0.05, can_cut=False
    )
    read = context.save_state
    started = decode_started(context)

    def logged_read(seq_id: int) -> bytearray:
        log.append("read")
        return read(seq_id)

    context.save_state = logged_read  # type: ignore[method-assign]
    try:
        history = list(range(2, 22))  # one step
        idle_work = GenerationRequest(history, greedy(1), keep_state=True, background=True)
        engine.submit(idle_work, Run().sink)
        assert started.wait(5)  # its step runs: a request comes meanwhile
        prompt = list(range(50, 60))
        run = Run()

        def sink(event: Event) -> None:
            if isinstance(event, TokenEvent) and not run.events:
                log.append("first token")
            run.sink(event)

        engine.submit(GenerationRequest(prompt, greedy(4)), sink)
        assert run.wait() == reference(prompt, 4)
        assert engine.close()
        assert log[:3] == ["first token", "read", "kept"]
    finally:
        engine.close()


@pytest.mark.parametrize("can_cut", [False, True])
def test_a_history_taken_over_unread_is_kept_where_memory_cannot_be_cut(
    can_cut: bool,
) -> None:
    # stop 59: at the Qwen3.5 2B shape a next turn that came during its history's step took the
    # history's sequence over before its state was read, and the state was lost: the turn's own
    # history then went on from the answer before (220-228 tokens where 122 would do). Where
    # memory can be cut, the state stays in the slot, to be cut back to: nothing is read
    kept: list[Kept] = []
    engine, context = make_engine(on_state=kept.append, step_seconds=0.05, can_cut=can_cut)
    started = decode_started(context)
    try:
        history = list(range(2, 22))  # one step
        request = GenerationRequest(history, greedy(1), keep_state=True, background=True)
        engine.submit(request, Run().sink)
        assert started.wait(5)  # its step runs: the next turn comes meanwhile
        prompt = [*history, 40, 41, 42]
        run = submit(engine, prompt, greedy(2))
        assert run.wait() == reference(prompt, 2)
        assert run.finish.num_cached_tokens == len(history)  # it went on in the history's slot
        assert engine.close()
        finals = [k.state.tokens for k in kept if k.is_final]
        assert finals == ([] if can_cut else [tuple(history)])
    finally:
        engine.close()


def test_a_history_read_while_its_next_turn_was_prefetched_is_gone_on_from_its_slot_taken() -> None:
    # stop 55: the next turn missed the history in the stores (it was being read), idle-time
    # work then took the one slot that held it, and the turn computed its whole prompt again
    kept: list[Kept] = []
    engine, _ = make_engine(sequences=1, on_state=kept.append)
    try:
        history = list(range(2, 42))
        work = Run()
        engine.submit(
            GenerationRequest(history, greedy(1), keep_state=True, background=True), work.sink
        )
        work.wait()
        other = Run()
        engine.submit(
            GenerationRequest(list(range(44, 54)), greedy(1), background=True), other.sink
        )
        other.wait()  # it took the slot that held the history
        assert [k.state.tokens for k in kept if k.is_final] == [tuple(history)]
        prompt = [*history, 55, 56, 57]
        run = submit(engine, prompt, greedy(4))  # stored: nothing (prefetched meanwhile)
        assert run.wait() == reference(prompt, 4)
        assert run.finish.num_cached_tokens == len(history)
    finally:
        assert engine.close()


def test_no_idle_time_step_starts_while_a_request_is_on_its_way_in() -> None:
    # stop 55: a next turn being prepared (5-10 ms) found another conversation's history step
    # started meanwhile, and waited for it (0.75 s at the Qwen3 1.7B shape)
    engine, context = make_engine(on_state=lambda kept: None)
    try:
        with engine.idle.arriving():
            work = Run()
            history = list(range(2, 22))
            engine.submit(GenerationRequest(history, greedy(1), background=True), work.sink)
            time.sleep(0.3)  # six times as long as idle-time work waits for an idle engine
            assert context.batches == []
            prompt = list(range(30, 40))
            run = submit(engine, prompt, greedy(3))
            assert run.wait() == reference(prompt, 3)
        assert work.wait() == reference(history, 1)
        first = {seq for seq, _, _ in context.batches[0]}
        assert [t for _, _, t in context.batches[0]] == prompt and len(first) == 1
    finally:
        assert engine.close()


@pytest.mark.parametrize("goes_on", [False, True])
def test_an_idle_time_step_stops_for_a_request_that_does_not_go_on_from_it(goes_on: bool) -> None:
    """Stop 55: a next turn that came during another conversation's history step waited for
    the whole step (0.75 s at the Qwen3 1.7B shape); a turn that goes on from the step, had it
    been stopped, would have computed it all again itself (88 tokens, not 20)."""
    kept: list[Kept] = []
    engine, context = make_engine(on_state=kept.append, step_seconds=0.2)
    started = decode_started(context)
    before = metrics.IDLE_STEPS_INTERRUPTED._value.get()
    try:
        history = list(range(2, 22))
        work = Run()
        request = GenerationRequest(history, greedy(1), keep_state=True, background=True)
        engine.submit(request, work.sink)
        assert started.wait(5)
        prompt = [*history, 40, 41, 42] if goes_on else list(range(30, 40))
        run = submit(engine, prompt, greedy(2))
        assert run.wait() == reference(prompt, 2)
        assert work.wait() == reference(history, 1)  # stopped, it ran again after the request
        stopped = 0 if goes_on else 1
        assert context.interrupted == stopped
        assert metrics.IDLE_STEPS_INTERRUPTED._value.get() == before + stopped
        assert run.finish.num_cached_tokens == (len(history) if goes_on else 0)
        if not goes_on:  # the first step computed is the request's: nothing stopped stayed
            assert [t for _, _, t in context.batches[0]] == prompt
            assert [t for _, _, t in context.batches[2]] == history
            assert [k.state.tokens for k in kept if k.is_final] == [tuple(history)]
    finally:
        assert engine.close()


@pytest.mark.parametrize("work_seconds", [0.0, 5.0])
def test_idle_time_work_queued_at_close_runs_first_within_its_time(work_seconds: float) -> None:
    # stop 56: a history queued for idle time when the server stopped was dropped, so after a
    # restart its next turn computed it again (111-122 tokens at the Qwen3 1.7B shape, not 20)
    kept: list[Kept] = []
    engine, context = make_engine(on_state=kept.append)
    history = list(range(2, 42))
    work = Run()
    engine.submit(
        GenerationRequest(history, greedy(1), keep_state=True, background=True), work.sink
    )
    assert engine.close(work_seconds=work_seconds)  # before the engine is idle long enough
    finals = [k.state.tokens for k in kept if k.is_final]
    if work_seconds:
        assert work.tokens == reference(history, 1)
        assert finals == [tuple(history)]
    else:
        assert work.finish.reason is Finish.ABORT and context.batches == [] and finals == []


def test_idle_time_work_at_close_stops_inside_its_step_when_its_time_is_up() -> None:
    kept: list[Kept] = []
    engine, context = make_engine(on_state=kept.append, step_seconds=2.0)
    started = decode_started(context)
    history = list(range(2, 42))
    work = Run()
    engine.submit(
        GenerationRequest(history, greedy(1), keep_state=True, background=True), work.sink
    )
    began = time.monotonic()
    assert engine.close(work_seconds=0.2)
    assert started.is_set() and context.interrupted == 1
    assert time.monotonic() - began < 1.5  # not the step's 2 s
    assert work.finish.reason is Finish.ABORT and [k for k in kept if k.is_final] == []


def test_a_request_still_in_at_close_ends_at_once_and_no_idle_time_work_runs() -> None:
    engine, context = make_engine(on_state=lambda kept: None, step_seconds=0.05)
    prompt = list(range(30, 40))
    run = submit(engine, prompt, greedy(50))
    assert decode_started(context).wait(5)
    engine.submit(GenerationRequest(list(range(2, 42)), greedy(1), background=True), Run().sink)
    num_batches = len(context.batches)
    assert engine.close(work_seconds=5.0)
    assert run.finish.reason is Finish.ABORT
    assert len(context.batches) <= num_batches + 1  # the step under way, no more
