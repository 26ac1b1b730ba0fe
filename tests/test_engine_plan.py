"""The engine's step as data, without its thread or a model: the scheduler's plan (which tokens
of which sequences, of what kind, where logits are read), the runner's one decode, the update's
events, against the fake context (tests/fake_llama.py)."""

from __future__ import annotations

from fake_llama import FakeContext, FakeModel, next_token, reference
from reame.detokenize import TextStream
from reame.engine.outbox import Outbox
from reame.engine.request import Finish, FinishEvent, GenerationRequest, TokenEvent
from reame.engine.runner import Runner
from reame.engine.scheduler import Scheduler
from reame.engine.sequence import SeqState, Sequence
from reame.engine.update import Update
from reame.llama.context import ContextShape
from reame.sampling import Sampler, SamplingParams
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation

CONTEXT_LENGTH = 128


class Parts:
    """A scheduler, runner and update over one fake context, driven a call at a time."""

    def __init__(self, sequences: int = 2, budget: int = 16) -> None:
        self.context = FakeContext(ContextShape(sequences * CONTEXT_LENGTH, budget, sequences, 1))
        self.spec = Speculation(SpecController("on", 4))
        self.scheduler = Scheduler(self.context, CONTEXT_LENGTH, keeps_prompts=False)
        self.finished = 0
        self.update = Update(
            FakeModel(),  # type: ignore[arg-type]
            self.scheduler.moves,
            self.scheduler,
            self._left,
            self.spec,
        )
        self.runner = Runner(self.scheduler.moves)

    def _left(self) -> None:
        self.finished += 1

    def add(self, prompt: list[int], max_tokens: int) -> Sequence:
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        seq = Sequence(
            GenerationRequest(prompt, params), lambda e: None, Sampler(params, 64), TextStream(())
        )
        seq.tokens.extend(prompt)
        self.scheduler.add(seq)
        return seq

    def step(self) -> Outbox:
        self.update.admitted(self.scheduler.admit(0.0))
        plan = self.scheduler.schedule()
        if plan:
            output = self.runner.run(plan)
            assert output is not None  # no move failed
            self.update.apply(plan, output)
        out, self.update.out = self.update.out, Outbox()
        return out


def tokens_of(out: Outbox, seq: Sequence) -> list[int]:
    return [e.token for s, e in out.events if s is seq and isinstance(e, TokenEvent)]


def test_the_plan_puts_decodes_first_then_prompt_chunks_within_the_budget_in_slot_order() -> None:
    parts = Parts(sequences=2, budget=16)
    long_one = parts.add(list(range(2, 32)), 4)  # 30 tokens: two chunks
    parts.step()  # its first 16
    short = parts.add([5, 6, 7], 4)
    parts.update.admitted(parts.scheduler.admit(0.0))
    plan = parts.scheduler.schedule()
    # prompt chunks go oldest first: the long one's last 14, then what is left for the short
    assert [(p.seq, p.start, len(p.tokens)) for p in plan.parts] == [
        (long_one, 16, 14),
        (short, 0, 2),
    ]
    assert [list(p.logit_rows()) for p in plan.parts] == [[13], []]  # only the long one ends
    assert plan.num_tokens == 16


def test_a_step_of_two_sequences_is_one_decode_and_each_gets_its_own_token() -> None:
    parts = Parts(sequences=2, budget=32)
    a, b = parts.add([3, 4, 5, 2], 3), parts.add([9, 8, 7, 6], 3)
    out = parts.step()
    # NOTE: narrow prompt chunks side by side round otherwise than alone (exact_steps), and a
    # later request would reuse them as computed alone: one decode each
    assert [len(batch) for batch in parts.context.batches] == [4, 4]
    assert tokens_of(out, a) == reference([3, 4, 5, 2], 1)
    assert tokens_of(out, b) == reference([9, 8, 7, 6], 1)
    plan = parts.scheduler.schedule()
    assert [(p.start, p.tokens, list(p.logit_rows())) for p in plan.parts] == [
        (4, (a.tokens[-1],), [0]),
        (4, (b.tokens[-1],), [1]),
    ]
    parts.context.batches.clear()
    out = parts.step()
    assert [len(batch) for batch in parts.context.batches] == [2]  # their decode tokens: one
    assert tokens_of(out, a) == reference([3, 4, 5, 2], 2)[1:]
    assert tokens_of(out, b) == reference([9, 8, 7, 6], 2)[1:]


def test_parts_of_unequal_sizes_are_one_decode_a_size_and_each_reads_its_own_logits() -> None:
    # a decode token, a 5-token prompt and a 3-token one: llama.cpp would cut them into
    # ubatches of 1, 2 and 2 tokens a sequence; apart, each is computed as it would be alone
    parts = Parts(sequences=3, budget=32)
    a = parts.add([3, 4], 4)
    parts.step()  # a's prompt and first token
    b, c = parts.add([9, 8, 7, 6, 5], 2), parts.add([21, 22, 23], 2)
    parts.context.batches.clear()
    out = parts.step()
    sizes = [sorted({seq for seq, _, _ in batch}) for batch in parts.context.batches]
    assert sizes == [[a.slot], [b.slot], [c.slot]]
    assert [len(batch) for batch in parts.context.batches] == [1, 5, 3]
    assert tokens_of(out, a) == reference([3, 4], 2)[1:]
    assert tokens_of(out, b) == reference([9, 8, 7, 6, 5], 1)
    assert tokens_of(out, c) == reference([21, 22, 23], 1)


def test_drafts_are_scheduled_apart_from_the_tokens_and_a_wrong_one_is_rolled_back() -> None:
    parts = Parts(sequences=1, budget=32)
    prompt = [11, 12, 13]
    seq = parts.add(prompt, 10)
    parts.step()  # the prompt, and its first token
    good = next_token(seq.tokens)
    seq.drafts = [good, (next_token([*seq.tokens, good]) + 1) % 63 + 1]  # right, then wrong
    seq.draft_parts = (("context", 2),)
    plan = parts.scheduler.schedule()
    (part,) = plan.parts
    assert part.num_drafts == 2 and len(part.tokens) == 3 and len(seq.tokens) == 4
    assert list(part.logit_rows()) == [0, 1, 2]  # a verify reads every position
    parts.update.apply(plan, parts.runner.run(plan))
    # the right draft and the model's own token after it are kept; the wrong draft is not
    assert seq.tokens == [*prompt, *reference(prompt, 3)] and seq.drafts == []
    # the refused draft's cell is cut as a move, done before the next batch (or read)
    parts.scheduler.moves.do()
    assert parts.context.kv[seq.slot] == seq.tokens[: seq.num_computed]
    assert seq.num_computed == len(seq.tokens) - 1


def test_an_abort_mid_request_ends_it_at_the_next_admission_and_frees_its_sequence() -> None:
    parts = Parts(sequences=1)
    seq = parts.add([4, 5, 6], 50)
    waiting = parts.add([7, 8, 9], 3)
    parts.step()
    assert seq.state == SeqState.RUNNING and waiting.state == SeqState.WAITING
    assert parts.scheduler.abort(seq.request.request_id) is None  # running: marked
    out = parts.step()
    finishes = [e for s, e in out.events if isinstance(e, FinishEvent)]
    assert [(f.reason, f.num_completion_tokens) for f in finishes] == [(Finish.ABORT, 1)]
    assert seq.state == SeqState.FINISHED and waiting.state == SeqState.RUNNING
    assert tokens_of(out, waiting) == reference([7, 8, 9], 1)  # it took the freed sequence
    assert parts.finished == 1


def test_tokens_a_grammar_forced_go_into_one_part_marked_as_forced() -> None:
    parts = Parts(sequences=1)
    seq = parts.add([21, 22, 23], 10)
    parts.step()
    sampled = seq.tokens[-1]
    seq.tokens += [30, 31]  # as Taker.run appends a forced run
    seq.num_forced = 2
    plan = parts.scheduler.schedule()
    (part,) = plan.parts
    assert (part.tokens, part.num_forced, part.num_drafts) == ((sampled, 30, 31), 2, 0)
    assert list(part.logit_rows()) == [2]  # logits only at the end of the run
    parts.update.apply(plan, parts.runner.run(plan))
    assert seq.num_forced == 0 and seq.tokens[-1] == next_token([21, 22, 23, sampled, 30, 31])


def test_a_widened_chunk_computes_its_tokens_again_after_the_runner_cut_them() -> None:
    # a prompt of 120 tokens cut at 70: the 50 after the cut go as the 64 before the end, whose
    # first 14 the context holds already (the fake refuses a position twice, as llama.cpp would
    # add a second cell for it); the answer is the one the prompt gives anyhow
    parts = Parts(sequences=1, budget=128)
    prompt = [(i * 5) % 60 + 1 for i in range(120)]
    seq = parts.add(prompt, max_tokens=3)
    seq.snapshots_due = [70]
    tokens = []
    for _ in range(6):
        tokens += tokens_of(parts.step(), seq)
    starts = [batch[0][1] for batch in parts.context.batches]
    assert starts[:2] == [0, 120 - 64]
    assert tokens == reference(prompt, 3)
