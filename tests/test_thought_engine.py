"""A thought in the engine, on the scripted fake model (tests/fake_llama.py, whose token t reads
"<t>"): told apart from the answer, closed by its budget or in place of an end, its grammar's
place kept for the answer, and verify runs that cross its end."""

from __future__ import annotations

from fake_llama import EOS, reference
from reame.engine.request import GenerationRequest, ThoughtSpec, TokenEvent
from reame.speculation.controller import SpecController
from reame.speculation.kit import Speculation
from reame.speculation.palimpsest import Palimpsest
from test_engine_fake import Run, greedy, make_engine

CLOSE = 61  # the engine's closing run: one token, whose text is "<61>"


def thought(close_token: int, budget: int | None = None) -> ThoughtSpec:
    return ThoughtSpec("<open>", f"<{close_token}>", (CLOSE,), True, budget)


def run_one(prompt: list[int], spec: ThoughtSpec, max_tokens: int, **engine_args) -> Run:
    engine, _ = make_engine(**engine_args)
    try:
        run = Run()
        engine.submit(GenerationRequest(prompt, greedy(max_tokens), thought=spec), run.sink)
        run.wait()
        return run
    finally:
        assert engine.close()


def reasoning(run: Run) -> str:
    return "".join(e.reasoning for e in run.events if isinstance(e, TokenEvent)) + (
        run.finish.reasoning
    )


def content(run: Run) -> str:
    return "".join(e.text for e in run.events if isinstance(e, TokenEvent)) + run.finish.text


def test_the_models_own_close_ends_the_thought_and_the_answer_follows() -> None:
    prompt = [3, 4, 5]
    written = reference(prompt, 24)
    close = written[5]
    run = run_one(prompt, thought(close), 24)
    assert run.tokens == written  # the engine wrote nothing of its own
    head = "".join(f"<{t}>" for t in written[:5])
    assert reasoning(run) == head
    assert content(run) == "".join(f"<{t}>" for t in written[6:])
    assert run.finish.num_reasoning_tokens == 6  # its closing marker with it


def test_a_spent_budget_is_closed_by_the_engine_and_counted_exactly() -> None:
    prompt = [3, 4, 5]
    run = run_one(prompt, thought(close_token=CLOSE, budget=4), 16)
    written = reference(prompt, 4)
    assert run.tokens[:5] == [*written, CLOSE]
    assert run.finish.num_reasoning_tokens == 4
    assert reasoning(run) == "".join(f"<{t}>" for t in written)
    assert content(run)  # the answer followed


def test_a_verify_run_that_crosses_the_thoughts_end_goes_on(tmp_path) -> None:
    """The same request again drafts its first answer from the Palimpsest: verify runs keep
    drafts past the thought's close, and stop there (the grammar of the answer, if any, has
    not seen them). The engine must go on from the last token kept: it hung, every token
    computed and none to sample, before the fix."""
    prompt = [3, 4, 5]
    written = reference(prompt, 40)
    for at in (4, 9, 17):
        archive = Palimpsest(tmp_path / str(at), "fake", 1 << 20)
        spec = Speculation(SpecController("on", 8), archive)
        engine, context = make_engine(speculation=spec)
        try:
            runs = []
            for _ in range(2):
                run = Run()
                request = GenerationRequest(prompt, greedy(40), thought=thought(written[at]))
                engine.submit(request, run.sink)
                run.wait()
                runs.append(run)
        finally:
            assert engine.close()
        assert runs[1].tokens == written
        accepted = runs[1].finish.num_accepted_drafts
        assert accepted > at  # drafts were kept across the close
        if at > 4:  # NOTE: more drafts kept than the answer holds: the thought's too
            assert accepted > len(written) - at - 1
        assert content(runs[1]) == content(runs[0])


def test_an_end_written_inside_the_thought_is_its_close_and_an_answer_follows() -> None:
    """The fake model never ends by itself: an end is forced by a logit bias on it."""
    engine, _ = make_engine()
    try:
        run = Run()
        params = greedy(12, logit_bias={EOS: 100.0})
        engine.submit(GenerationRequest([3, 4, 5], params, thought=thought(CLOSE)), run.sink)
        run.wait()
    finally:
        assert engine.close()
    assert run.tokens[0] == CLOSE  # in the end's place
    assert EOS not in run.tokens[:2]  # no end before an answer has words
    assert run.finish.num_reasoning_tokens == 0


def test_no_draft_lets_an_end_through_before_the_answer_has_words(tmp_path) -> None:
    """The model wants to end at every token (a logit bias): inside the thought its end is the
    close, right after it the end is masked out until the answer has a word. The same request
    again drafts from the first one's tokens; a verify run there would have taken the end
    unmasked and answered nothing (before the fix)."""
    archive = Palimpsest(tmp_path, "fake", 1 << 20)
    engine, _ = make_engine(speculation=Speculation(SpecController("on", 8), archive))
    try:
        runs = []
        for _ in range(2):
            run = Run()
            params = greedy(12, logit_bias={EOS: 100.0})
            engine.submit(GenerationRequest([3, 4, 5], params, thought=thought(CLOSE)), run.sink)
            run.wait()
            runs.append(run)
    finally:
        assert engine.close()
    for run in runs:
        assert run.tokens[0] == CLOSE and content(run)
    assert content(runs[1]) == content(runs[0])
