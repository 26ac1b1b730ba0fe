"""Thinking detected on the real chat templates of the catalog's thinking models (Qwen3,
Qwen3.5) and a DeepSeek-R1 distill, as llama.cpp ships them (tests/templates), and on the two
written for the server tests; the answer of a scripted model told apart, over any split of its
stream; a request's thinking rendered back through each template."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reame.chat_template import ChatTemplate
from reame.thinking.budget import ThinkingPlan
from reame.thinking.framing import PromptEnd, frame, prompt_end, template_kwargs, with_thought_apart
from reame.thinking.split import Phase, ThoughtSplit
from reame.thinking.syntax import analyse

TEMPLATES = Path(__file__).parent / "templates"
THINKING = {
    "Qwen-Qwen3-0.6B.jinja": PromptEnd.FREE,
    "Qwen3.5-4B.jinja": PromptEnd.OPEN,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": PromptEnd.OPEN,
    "chatml-think-open.jinja": PromptEnd.OPEN,
    "chatml-think-free.jinja": PromptEnd.FREE,
}
NOT_THINKING = ["LFM2-8B-A1B.jinja", "Qwen3-Coder.jinja"]


def template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(), "<s>", "</s>")


@pytest.mark.parametrize("name", sorted(THINKING))
def test_thinking_templates_show_their_markers_switch_and_dropped_history(name: str) -> None:
    syntax = analyse(template(name))
    assert syntax is not None
    assert (syntax.open, syntax.close) == ("<think>", "</think>")
    assert syntax.close_run.strip() == "</think>"
    assert "enable_thinking" in syntax.switches
    assert syntax.drops_history  # each of these renders an earlier turn without its thought


@pytest.mark.parametrize("name", NOT_THINKING)
def test_templates_of_models_that_do_not_think_show_no_thinking(name: str) -> None:
    assert analyse(template(name)) is None


@pytest.mark.parametrize("name", sorted(THINKING))
def test_the_generation_prompt_opens_the_thought_or_leaves_it_to_the_model(name: str) -> None:
    t = template(name)
    syntax = analyse(t)
    assert syntax is not None
    on = t.render([{"role": "user", "content": "Hi"}], True, None, {"enable_thinking": True})
    off = t.render([{"role": "user", "content": "Hi"}], True, None, {"enable_thinking": False})
    assert prompt_end(syntax, on) is THINKING[name]
    assert prompt_end(syntax, off) is PromptEnd.CLOSED


@pytest.mark.parametrize("name", sorted(THINKING))
def test_a_request_that_does_not_think_gets_a_closed_prompt_and_a_bound_one_an_open_one(
    name: str,
) -> None:
    t = template(name)
    syntax = analyse(t)
    assert syntax is not None
    free = t.render([{"role": "user", "content": "Hi"}], True, None, {"enable_thinking": True})
    if prompt_end(syntax, free) is PromptEnd.OPEN:
        free = free[: free.rstrip().rfind(syntax.open)]  # as a template without a switch
    closed = frame(syntax, free, ThinkingPlan(False, 0), answer_bound=False)
    assert closed.end is PromptEnd.CLOSED and prompt_end(syntax, closed.text) is PromptEnd.CLOSED
    opened = frame(syntax, free, ThinkingPlan(True, None), answer_bound=True)
    assert opened.end is PromptEnd.OPEN and prompt_end(syntax, opened.text) is PromptEnd.OPEN
    zero = frame(syntax, opened.text, ThinkingPlan(True, 0), answer_bound=True)
    assert zero.end is PromptEnd.CLOSED


def test_switches_follow_the_plan_and_the_request_wins() -> None:
    syntax = analyse(template("Qwen3.5-4B.jinja"))
    assert template_kwargs(syntax, ThinkingPlan(False, 0), "none", {}) == {"enable_thinking": False}
    assert template_kwargs(syntax, ThinkingPlan(True, None), None, {}) == {"enable_thinking": True}
    asked = {"enable_thinking": False, "custom": 1}
    assert template_kwargs(syntax, ThinkingPlan(True, None), None, asked) == asked
    assert template_kwargs(None, ThinkingPlan(True, None), "low", {"x": "y"}) == {"x": "y"}


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B.jinja", "Qwen3.5-4B.jinja"])
def test_a_thought_sent_back_renders_alike_apart_or_in_content(name: str) -> None:
    t = template(name)
    syntax = analyse(t)
    sent_apart = {"role": "assistant", "content": "Paris.", "reasoning_content": "France..."}
    in_content = {"role": "assistant", "content": "<think>\nFrance...\n</think>\n\nParis."}
    for last in (True, False):
        tail = [] if last else [{"role": "user", "content": "And Italy?"}]
        rendered = [
            t.render([{"role": "user", "content": "Capital?"}, m, *tail], False)
            for m in (sent_apart, with_thought_apart(in_content, syntax))
        ]
        assert rendered[0] == rendered[1]
        assert ("France..." in rendered[0]) is last  # an earlier turn's thought is dropped


def feed_all(split: ThoughtSplit, pieces: list[str]) -> tuple[str, str]:
    reasoning, content = [], []
    for piece in pieces:
        out = split.feed(piece)
        reasoning.append(out.reasoning)
        content.append(out.content)
    out = split.finish()
    return "".join(reasoning) + out.reasoning, "".join(content) + out.content


ANSWERS = [
    ("<think>\nLet me see: 2+2.\n</think>\n\nIt is 4.", False, "Let me see: 2+2.", "It is 4."),
    ("\nLet me see </thi nk.\n</think>\n\n4", True, "Let me see </thi nk.", "4"),
    ("No thought here, <think> later.", False, "", "No thought here, <think> later."),
    ("  <think>short", False, "short", ""),
    ("cut short  \n", True, "cut short", ""),
]


@pytest.mark.parametrize(("text", "is_open", "reasoning", "content"), ANSWERS)
def test_an_answer_is_told_apart_from_its_thought(text, is_open, reasoning, content) -> None:
    assert feed_all(ThoughtSplit("<think>", "</think>", is_open), [text]) == (reasoning, content)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ANSWERS), st.lists(st.integers(0, 60), max_size=12))
def test_any_split_of_the_stream_reads_as_the_whole(answer, cuts) -> None:
    text, is_open, reasoning, content = answer
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    assert feed_all(ThoughtSplit("<think>", "</think>", is_open), pieces) == (reasoning, content)


def test_a_thought_never_gives_out_part_of_its_closing_marker() -> None:
    split = ThoughtSplit("<think>", "</think>", True)
    assert split.feed("Thinking </th").reasoning == "Thinking"
    assert split.phase is Phase.THINKING
    out = split.feed("ink>\n\nAnswer")
    assert (out.reasoning, out.content) == ("", "Answer")
    assert split.phase is Phase.ANSWER
