"""The engine on memory that cannot be cut back (recurrent layers, as Qwen3.5's linear attention),
against the fake context in its recurrent mode: drafts are rolled back by a checkpoint and the
kept tokens computed again, never by going on from a wrong state; prefixes, resident prompts and
a Conclave still give what the model writes alone."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest

from fake_llama import FakeContext, FakeModel, reference
from reame.engine.engine import Engine
from reame.engine.request import GenerationRequest
from reame.llama.context import ContextShape
from reame.saved_state import SavedState, Stored
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation
from test_engine_fake import CONTEXT_LENGTH, Run, greedy

REPEATING = [7, 8, 9, 10, 7, 8, 9, 10, 7, 8, 9, 10, 7, 8]  # the lookup drafts 9, 10, ...


class NoCheckpoints(FakeContext):
    """Recurrent memory whose checkpoints llama.cpp refuses to load."""

    def rollback(self, seq_id: int, checkpoint: bytearray, position: int) -> bool:
        return False


def recurrent_engine(
    context_type: type[FakeContext] = FakeContext, sequences: int = 2, **kwargs: object
) -> tuple[Engine, FakeContext]:
    shape = ContextShape(sequences * CONTEXT_LENGTH, 32, sequences, 1)
    context = context_type(shape, can_cut=False)
    engine = Engine(FakeModel(), context, CONTEXT_LENGTH, **kwargs)  # type: ignore[arg-type]
    engine.start()
    context.batches.clear()  # the exact-run probe's, before any request
    return engine, context


@pytest.fixture
def speculating() -> Iterator[tuple[Engine, FakeContext, SpecController]]:
    controller = SpecController("on", 8)
    engine, context = recurrent_engine(speculation=Speculation(controller))
    yield engine, context, controller
    assert engine.close()


def submit(engine: Engine, request: GenerationRequest) -> Run:
    run = Run()
    engine.submit(request, run.sink)
    return run


def test_refused_drafts_are_rolled_back_to_a_checkpoint_and_the_kept_ones_replayed(
    speculating: tuple[Engine, FakeContext, SpecController],
) -> None:
    engine, context, controller = speculating
    run = submit(engine, GenerationRequest(REPEATING, greedy(40)))
    assert run.wait() == reference(REPEATING, 40)
    stats = controller.drafters["context"]
    assert stats.proposed > stats.accepted  # drafts were refused...
    assert context.cuts_refused > 0  # ...the memory could not be cut back...
    assert controller.replayed_tokens > 0 and controller.uses_checkpoints  # ...so: rolled back
    assert controller.checkpoint_seconds > 0
    # NOTE: never computed again from its first token: each rollback went back one run only
    assert len([b for b in context.batches if any(p == 0 for _, p, _ in b)]) == 1


def test_without_a_checkpoint_a_rollback_computes_the_sequence_again() -> None:
    controller = SpecController("on", 8)
    engine, context = recurrent_engine(NoCheckpoints, speculation=Speculation(controller))
    try:
        run = submit(engine, GenerationRequest(REPEATING, greedy(30)))
        assert run.wait() == reference(REPEATING, 30)
        # NOTE: every refused run recomputed the whole sequence from its first token
        firsts = [b for b in context.batches if any(p == 0 for _, p, _ in b)]
        assert len(firsts) > 1 and context.cuts_refused > 0
    finally:
        assert engine.close()


def test_a_saved_prefix_is_restored_and_a_resident_prompt_reused_or_computed_anew() -> None:
    taken: list[SavedState] = []
    engine, context = recurrent_engine(
        on_state=lambda kept: taken.append(kept.state), takes_snapshots=True
    )
    try:
        prompt = [(i * 5) % 60 + 2 for i in range(68)]
        first = GenerationRequest(prompt, greedy(5), snapshot_at=(40,))
        assert submit(engine, first).wait() == reference(prompt, 5)
        assert [s.tokens for s in taken] == [tuple(prompt[:40])]
        # a prompt that shares the first 40: restored from the snapshot (no cut needed there)
        other = [*prompt[:40], 3, 4, 5]
        stored = (Stored("ram", taken[0]),)
        restored = submit(engine, GenerationRequest(other, greedy(6), stored=stored))
        assert restored.wait() == reference(other, 6)
        assert restored.finish.num_cached_tokens == 40
        # the first prompt again: its sequence's KV cannot be cut back to a chunk end, so it is
        # emptied and computed anew rather than reused wrong
        again = submit(engine, GenerationRequest(prompt, greedy(5)))
        assert again.wait() == reference(prompt, 5)
        assert pickle.loads(bytes(taken[0].data)) == prompt[:40]
    finally:
        assert engine.close()


def test_a_conclave_larger_than_the_sequences_forks_on_recurrent_memory() -> None:
    engine, context = recurrent_engine(sequences=2)
    try:
        prompt = [40, 41, 42, 43, 44, 45]
        runs = [Run() for _ in range(3)]
        requests = [GenerationRequest(prompt, greedy(8 + k)) for k in range(3)]
        engine.submit_group(requests, [r.sink for r in runs])
        for k, run in enumerate(runs):
            assert run.wait() == reference(prompt, 8 + k)
        assert len([b for b in context.batches if any(t == 40 for _, _, t in b)]) == 1
    finally:
        assert engine.close()
