"""KV moves, model-free on the fake context: done in the order decided, before a read of the
state they change; a move that fails empties its sequences and reports them, and the scheduler
starts whoever held one over (a step with one of them in it computes nothing)."""

from __future__ import annotations

import pickle
from collections.abc import Sequence as Seq

from fake_llama import FakeContext
from reame.detokenize import TextStream
from reame.engine.kv_moves import Copy, Cut, Empty, KVMoves, Restore
from reame.engine.request import GenerationRequest
from reame.engine.reuse_index import Resident
from reame.engine.runner import Runner
from reame.engine.scheduler import Scheduler
from reame.engine.sequence import Sequence
from reame.engine.step_plan import Part, StepPlan
from reame.llama.context import ContextShape
from reame.sampling import Sampler, SamplingParams

SHAPE = ContextShape(num_cells=512, batch_size=64, num_sequences=2, num_threads=1)


class Refuses(FakeContext):
    """Refuses every restore and every copy, as a state that does not fit would be."""

    def load_state(self, seq_id: int, data: bytes | bytearray) -> bool:
        self.kv[seq_id] = [7, 7, 7]  # half-written, as a refused llama.cpp restore may leave it
        return False

    def copy(self, source: int, targets: Seq[int]) -> None:
        raise RuntimeError("no room")


def filled(context: FakeContext, slot: int, tokens: list[int]) -> None:
    n = len(tokens)
    context.decode(tokens, list(range(n)), [slot] * n, [False] * n)


def test_moves_are_done_in_order_and_before_a_read() -> None:
    context = FakeContext(SHAPE)
    moves = KVMoves(context)
    filled(context, 0, [1, 2, 3, 4, 5])
    moves.add(Cut(0, 4))
    moves.add(Copy(0, (1,)))
    moves.add(Cut(1, 2))
    assert context.kv[0] == [1, 2, 3, 4, 5]  # queued, not done
    assert pickle.loads(bytes(moves.read(1) or b"")) == [1, 2]
    assert context.kv[0] == [1, 2, 3, 4] and not moves.take_lost()


def test_a_failed_move_empties_its_sequences_and_reports_them() -> None:
    context = Refuses(SHAPE)
    moves = KVMoves(context)
    filled(context, 0, [1, 2, 3])
    moves.add(Restore(1, b"state"))
    moves.add(Copy(0, (1,)))
    moves.add(Empty(0))
    moves.do()
    assert context.kv[1] == [] and moves.take_lost() == {1}
    moves.add(Restore(0, b"state"))
    assert moves.read(0) is None  # what it holds is not what it was to hold
    assert moves.take_lost() == {0} and not moves.take_lost()


def sequence(prompt: list[int]) -> Sequence:
    params = SamplingParams(temperature=0.0, max_tokens=4)
    request = GenerationRequest(prompt, params)
    seq = Sequence(request, lambda e: None, Sampler(params, 64), TextStream())
    seq.tokens.extend(prompt)
    return seq


def test_the_scheduler_starts_over_whoever_held_a_lost_slot() -> None:
    scheduler = Scheduler(Refuses(SHAPE), 256, keeps_prompts=True)
    seq = sequence(list(range(40)))
    scheduler.slots.place(seq, None)
    seq.starts_at(32)  # as a restore would have it
    seq.propose([5, 6])  # for the step that does not run: left, no step could take it again
    scheduler.start(seq)
    scheduler.reuse.insert(1, Resident(list(range(50)), [50], [(0, 50)], "", 50, ""))
    scheduler.lost({seq.slot, 1})
    assert seq.num_computed == seq.num_cached == 0 and seq.chunk_ends == [0]
    assert seq.drafts == []
    assert scheduler.reuse.take(1) is None  # what the free slot held is forgotten


def test_a_step_with_a_lost_sequence_in_it_computes_nothing() -> None:
    context = Refuses(SHAPE)
    moves = KVMoves(context)
    runner = Runner(moves)
    seq = sequence([1, 2, 3])
    seq.placed(0)
    moves.add(Restore(0, b"state"))
    plan = StepPlan((Part(seq, 0, (1, 2, 3), 0, 0, True, 0),))
    assert runner.run(plan) is None and context.batches == []
    assert moves.take_lost() == {0}
