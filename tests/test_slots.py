"""Slots on a context whose memory cannot be cut back (recurrent layers): every failed removal
is a recompute, never a sequence that holds what it should not; and on one that can, what a
resident reuse keeps of the request's snapshot points. No model: a fake context."""

from __future__ import annotations

from dataclasses import dataclass, field

from reame.detokenize import TextStream
from reame.engine.kv_moves import KVMoves
from reame.engine.request import GenerationRequest
from reame.engine.reuse_index import ReuseIndex
from reame.engine.sequence import Sequence
from reame.engine.slots import Slots
from reame.sampling import Sampler, SamplingParams
from reame.saved_state import SavedState, Stored


@dataclass
class Shape:
    num_sequences: int = 2


@dataclass
class UncuttableContext:
    """Holds a count of positions per sequence; like llama.cpp's recurrent memory it can only be
    emptied, never cut back to a position."""

    shape: Shape = field(default_factory=Shape)
    held: dict[int, int] = field(default_factory=dict)
    can_cut: bool = False

    def remove(self, seq_id: int, start: int = 0, end: int = -1) -> bool:
        if start == 0 and end == -1:
            self.held[seq_id] = 0
            return True
        return start >= self.held.get(seq_id, 0)  # nothing to cut: fine

    def clear(self, seq_id: int) -> None:
        self.held[seq_id] = 0

    def load_state(self, seq_id: int, data: bytes) -> bool:
        self.held[seq_id] = len(data)
        return True


def sequence(
    prompt: list[int], prefix: SavedState | None = None, cold_cuts: tuple[int, ...] = ()
) -> Sequence:
    params = SamplingParams(temperature=0.0, max_tokens=4)
    stored = (Stored("ram", prefix),) if prefix is not None else ()
    seq = Sequence(
        GenerationRequest(prompt, params, stored=stored, cold_cuts=cold_cuts),
        lambda e: None,
        Sampler(params, 100),
        TextStream(),
    )
    seq.tokens.extend(prompt)
    return seq


def slots_on(context: UncuttableContext, keeps_prompts: bool) -> Slots:
    moves = KVMoves(context)  # type: ignore[arg-type]
    return Slots(moves, keeps_prompts, ReuseIndex(context.can_cut, 512))


def place(slots: Slots, seq: Sequence) -> None:
    """Admission: the one match, then the slot it names; the moves it queued done (as the
    runner does before the next batch), none of them failing."""
    slots.place(seq, slots.reuse.match(seq))
    slots.moves.do()
    assert not slots.moves.take_lost()


def release(slots: Slots, seq: Sequence) -> None:
    slots.release(seq, keep_prompt=True)
    slots.moves.do()
    assert not slots.moves.take_lost()


def test_a_resident_prompt_that_cannot_be_cut_is_computed_again_not_reused() -> None:
    context = UncuttableContext()
    slots = slots_on(context, keeps_prompts=True)
    first = sequence(list(range(80)))
    place(slots, first)
    context.held[first.slot] = 80 + 5  # its prompt and an answer of 5 tokens
    first.chunk_ends = [80]
    first.tokens.extend([1, 2, 3, 4, 5])
    release(slots, first)  # the answer cannot be cut off: nothing kept
    assert context.held == {0: 0}
    second = sequence(list(range(80)) + [7])
    place(slots, second)
    assert second.num_computed == second.num_cached == 0


def test_a_stored_state_that_cannot_be_cut_to_the_prompt_is_not_restored() -> None:
    context = UncuttableContext()
    slots = slots_on(context, keeps_prompts=False)
    # diverges after 64 tokens, where its prompt's first chunk ended
    stored = SavedState(tuple(range(64)) + (99, 98), b"x" * 66, chunk_ends=(64, 66))
    seq = sequence(list(range(64)) + [5, 6], prefix=stored)
    assert slots.reuse.match(seq) is None  # not read in only to be emptied again
    place(slots, seq)
    assert seq.num_computed == seq.num_cached == 0 and seq.slot not in context.held


def test_a_state_that_parts_from_the_prompt_where_no_chunk_of_it_ended_is_not_restored() -> None:
    context = UncuttableContext()
    slots = slots_on(context, keeps_prompts=False)
    stored = SavedState(tuple(range(64)) + (99, 98), b"x" * 66)  # how it was computed: unknown
    seq = sequence(list(range(64)) + [5, 6], prefix=stored)
    place(slots, seq)
    assert seq.num_computed == seq.num_cached == 0 and seq.slot not in context.held


@dataclass
class CuttableContext(UncuttableContext):
    """A plain KV cache: cut back to any position."""

    can_cut: bool = True

    def remove(self, seq_id: int, start: int = 0, end: int = -1) -> bool:
        self.held[seq_id] = min(self.held.get(seq_id, 0), start)
        return True


def test_a_resident_reused_short_of_a_snapshot_point_drops_that_point() -> None:
    # rag at 75% overlap: 490 tokens shared with the last prompt, whose chunks ended at the
    # stride (512) and at its end; stopping at 512 again would make a 22-token narrow chunk
    context = CuttableContext()
    slots = slots_on(context, keeps_prompts=True)
    first = sequence(list(range(684)))
    place(slots, first)
    held_slot = first.slot
    context.held[held_slot] = 684
    first.chunk_ends, first.chunks = [512, 684], [(0, 512), (512, 684)]
    release(slots, first)
    second = sequence(list(range(490)) + list(range(1000, 1195)), cold_cuts=(512, 685))
    second.snapshots_due = [512, 685]
    place(slots, second)
    assert second.slot == held_slot and second.num_cached == 490
    assert second.snapshots_due == [685]
