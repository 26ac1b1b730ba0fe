"""Tokenizing a prompt in pieces cut at turn markers gives the whole prompt's tokens, and a long
piece (a system prompt) is tokenized once."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reame.llama.model import Model
from reame.runtime import Runtime
from reame.segment_tokenizer import SegmentTokenizer, marker_candidates

SYSTEM = "You answer briefly. " + "The harbor lantern glows over the quiet water. " * 40


def by_chars(text: str, add_special: bool) -> list[int]:
    """A tokenizer of our own: one id a character, 0 for the start."""
    return ([0] if add_special else []) + [ord(c) for c in text]


def test_pieces_start_at_markers_and_only_the_first_gets_the_start_token() -> None:
    calls: list[tuple[str, bool]] = []

    def recording(text: str, add_special: bool) -> list[int]:
        calls.append((text, add_special))
        return by_chars(text, add_special)

    tok = SegmentTokenizer(recording, ["<t>"], min_chars=4)
    text = "<t>system long<t>user hi<t>"
    assert tok(text) == by_chars(text, True)
    assert calls == [("<t>system long", True), ("<t>user hi", False), ("<t>", False)]
    calls.clear()
    assert tok(text) == by_chars(text, True)
    assert calls == [("<t>", False)]  # the two long pieces came from memory
    assert tok.hits == 2


def test_without_markers_the_text_is_tokenized_whole() -> None:
    tok = SegmentTokenizer(by_chars, [])
    assert tok("a<t>b") == by_chars("a<t>b", True)


def test_the_least_recently_used_piece_goes_first() -> None:
    tok = SegmentTokenizer(by_chars, ["|"], min_chars=2, max_pieces=2)  # "x" is too short
    tok("x|a|b")
    tok("x|a")  # |a is now the newer
    tok("x|c")  # |b goes
    hits = tok.hits
    tok("x|a|c")
    assert tok.hits == hits + 2
    tok("x|b")
    assert tok.hits == hits + 2


def test_the_pieces_kept_stay_within_a_byte_budget() -> None:
    calls: list[str] = []

    def recording(text: str, add_special: bool) -> list[int]:
        calls.append(text)
        return by_chars(text, add_special)

    # a piece of 100 characters costs 100 + 4 * 100 bytes: two fit in 1200, not three
    tok = SegmentTokenizer(recording, ["|"], min_chars=10, max_pieces=100, max_bytes=1200)
    pieces = ["|" + c * 99 for c in "abc"]
    for p in pieces:
        tok("x" + p)  # NOTE: after a short first piece: each is tokenized without the start
    assert tok.num_bytes == 1000
    calls.clear()
    tok("x" + pieces[2] + pieces[1])
    assert calls == ["x"]  # the two most recent were kept
    tok("x" + pieces[0])
    assert calls == ["x", "x", pieces[0]]  # the oldest went for them
    assert tok.num_bytes <= 1200
    huge = "|" + "z" * 999  # alone over the budget: tokenized, never kept
    tok("x" + huge)
    tok("x" + huge)
    assert calls.count(huge) == 2 and tok.num_bytes <= 1200


def test_markers_are_found_in_a_template() -> None:
    source = "{% for m in messages %}<|im_start|>{{ m.role }}<|im_end|>{% endfor %}<start_of_turn>"
    assert marker_candidates(source) == ["<start_of_turn>", "<|im_end|>", "<|im_start|>"]


# contents with the markers' own text and the characters around them that tokenizers merge
TEXT = st.lists(
    st.sampled_from([*"ab  \n\tÀé日本🙂.,'<|>", "<|im_start|>", "<|im_end|>", "<start_of_turn>"]),
    max_size=40,
).map("".join)


@pytest.mark.model
def test_smollm2_chat_prompts_tokenize_as_the_whole(smollm2: Runtime) -> None:
    service, model = smollm2.service, smollm2.model

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["user", "assistant"]), TEXT), max_size=5))
    def check(turns: list[tuple[str, str]]) -> None:
        messages = [{"role": "system", "content": SYSTEM}]
        messages += [{"role": r, "content": c} for r, c in turns] or [
            {"role": "user", "content": ""}
        ]
        template, _ = service.chat._tools()
        whole = model.tokenize(template.render(messages, True))
        assert service.chat.prompt(messages) == whole

    check()
    _, tokenize = service.chat._tools()
    assert tokenize.hits > 100  # the system prompt was tokenized once, not at each call


@pytest.mark.model
def test_gemma_sentencepiece_pieces_tokenize_as_the_whole(gemma_path: Path) -> None:
    model = Model(gemma_path)
    try:
        markers = ["<start_of_turn>", "<end_of_turn>"]
        assert all(model.is_splitting_token(m) for m in markers)
        tok = SegmentTokenizer(model.tokenize, markers, min_chars=1)

        @settings(max_examples=150, deadline=None)
        @given(st.lists(st.tuples(st.sampled_from(markers), TEXT), max_size=6), TEXT)
        def check(parts: list[tuple[str, str]], head: str) -> None:
            text = head + "".join(m + t for m, t in parts)
            assert tok(text) == model.tokenize(text)

        check()
    finally:
        model.close()


@pytest.mark.model
def test_only_special_tokens_that_keep_the_space_before_them_split(smollm2: Runtime) -> None:
    model = smollm2.model
    assert model.is_splitting_token("<|im_start|>")
    assert not model.is_splitting_token("hello")
    assert not model.is_splitting_token("<|im_start|><|im_end|>")
