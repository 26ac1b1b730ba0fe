"""The Conclave's answer extraction and vote counting: pure, no model."""

from __future__ import annotations

import re

import pytest

from reame.conclave.answers import compile_rule, extract
from reame.conclave.vote import Tally


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("5 + 3 = 8", "8"),
        ("The answer is 1,200.50 dollars.", "1200.5"),
        ("It costs -4 degrees, so -4.0", "-4"),
        ("She has 12 apples.\nSo the total is 15.", "15"),
        ("version1 has no number standing alone", None),
        ("no digits here", None),
    ],
)
def test_number_takes_the_last_number_normalized(text: str, answer: str | None) -> None:
    assert extract(text, "number") == answer


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("The answer is (B) because it rains.", "B"),
        ("Answer: C", "C"),
        ("D) Paris is the capital", "D"),
        ("(A) Rome", "A"),
        ("A cat is an animal.", None),  # a sentence that opens with the article A
        ("I think Berlin.", None),
    ],
)
def test_choice_finds_the_letter_given_as_the_answer(text: str, answer: str | None) -> None:
    assert extract(text, "choice") == answer


def test_line_is_the_first_line_normalized() -> None:
    assert extract("  **Paris**.\nIt is in France.", "line") == "paris"
    assert extract("\n\nThe   Blue Whale!", "line") == "the blue whale"
    assert extract("x" * 300, "line") is None
    assert extract("   \n", "line") is None


@pytest.mark.timeout(10)
def test_a_long_line_of_punctuation_is_read_in_linear_time() -> None:
    # the trailing strip was a regex, `[\s.!?,;:*_`"']+$`, that tried every start of the run:
    # a 200,000-character answer of dots held the event loop for minutes (quadratic)
    dots = "." * 200_000
    assert extract(dots + "x", "line") is None  # too long to be a short answer
    assert extract("Paris" + dots, "line") == "paris"


def test_auto_prefers_a_named_choice_then_a_number_then_the_line() -> None:
    assert extract("There are 3 options; the answer is B.", "auto") == "B"
    assert extract("Two plus two makes 4.", "auto") == "4"
    assert extract("Paris.\nA lovely city", "auto") == "paris"


def test_a_pattern_takes_its_group_of_the_last_match() -> None:
    rule = compile_rule(r"ANSWER: (\w+)")
    assert isinstance(rule, re.Pattern)
    assert extract("ANSWER: no\nthinking again... ANSWER: yes", rule) == "yes"
    assert extract("nothing", rule) is None
    assert extract("x=1, x=2", compile_rule(r"x=\d")) == "x=2"


def test_a_bad_rule_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="nor a regular expression"):
        compile_rule("(unclosed")
    assert compile_rule("number") == "number"


def test_an_absolute_majority_of_n_decides_before_all_are_in() -> None:
    tally = Tally(5)
    tally.add(3, "42")
    tally.add(0, "41")
    tally.add(4, "42")
    assert tally.majority() is None  # 2 of 5 is not more than half
    tally.add(1, "42")
    assert tally.majority() == "42"
    assert tally.num_in == 4
    assert tally.winner() == ("42", 1)  # the lowest-numbered voter's text answers


def test_half_is_not_a_majority_and_a_tie_goes_to_the_lowest_candidate() -> None:
    tally = Tally(4)
    for candidate, answer in [(3, "a"), (2, "b"), (1, "a"), (0, "b")]:
        tally.add(candidate, answer)
    assert tally.majority() is None
    assert tally.winner() == ("b", 0)


def test_plurality_wins_when_no_majority_forms() -> None:
    tally = Tally(5)
    for candidate, answer in [(0, "x"), (1, "y"), (2, "y"), (3, None), (4, "z")]:
        tally.add(candidate, answer)
    assert tally.majority() is None
    assert tally.winner() == ("y", 1)
    summary = tally.summary()
    assert summary["tally"] == {"y": 2, "x": 1, "z": 1}
    assert summary["abstained"] == 1
    assert summary["majority"] is False


def test_abstentions_do_not_vote_and_nobody_answering_gives_candidate_zero_or_lowest() -> None:
    tally = Tally(3)
    tally.add(2, None)
    tally.add(1, None)
    assert tally.winner() == (None, 1)
    assert Tally(3).winner() == (None, 0)
    tally.add(0, "only")
    assert tally.winner() == ("only", 0)
    assert tally.majority() is None  # one of three


def test_one_candidate_is_its_own_majority() -> None:
    tally = Tally(1)
    tally.add(0, "7")
    assert tally.majority() == "7"
    assert tally.winner() == ("7", 0)
