"""The fact exam's scorer, without a model: hand-labelled answers to questions a document
answers and to questions it cannot (absent), each scored right, missing or invented, and exam
files that are malformed refused with what is wrong."""

from __future__ import annotations

import re

import pytest

from reame_bench.exam_score import Question, Tally, read_exam, score, ungrounded

DOCUMENT = (
    "The Hotel Miramare in Sanremo opened on 12 June 1924. It has 48 rooms and 3 restaurants. "
    "Its first owner was Giulia Ferraris; since 2019 it has belonged to the Conti family, who "
    "paid 4,500,000 euros for it."
)
ROOMS = Question("How many rooms has the hotel?", accept=(r"\b48\b",), reject=(r"\b84\b",))
OWNER = Question("Who was its first owner?", accept=(r"Giulia Ferraris",))
OPENED = Question("When did it open?", accept=(r"12 June 1924", r"June 12,? 1924"))
PRICE = Question("What did the Conti family pay?", accept=(r"4[.,]?500[.,]?000", r"4\.5 million"))
POOL = Question("How deep is the hotel's pool?", absent=True)

LABELLED = [  # (question, answer, the label a reader gave it)
    (ROOMS, "The hotel has 48 rooms.", "right"),
    (ROOMS, "It has 84 rooms.", "invented"),  # a reject pattern
    (ROOMS, "It has 52 rooms.", "invented"),  # a number the document does not hold
    (ROOMS, "The document mentions its restaurants.", "missing"),
    (ROOMS, "It has 3 restaurants.", "missing"),  # a true fact, not the one asked
    (OWNER, "Giulia Ferraris was the first owner.", "right"),
    (OWNER, "The first owner was Marco Bianchi.", "invented"),  # a name not in the document
    (OWNER, "The Conti family.", "missing"),  # wrong, but nothing invented
    (OPENED, "It opened on June 12, 1924.", "right"),
    (OPENED, "It opened on 3 March 1924.", "invented"),  # a date not in the document
    (OPENED, "It opened in 1931.", "invented"),
    (PRICE, "They paid 4,500,000 euros.", "right"),
    (PRICE, "They paid 4500000 euros.", "right"),
    (PRICE, "They paid 5,000,000 euros.", "invented"),
    (POOL, "The document does not say how deep the pool is.", "right"),
    (POOL, "That is not mentioned in the text.", "right"),
    (POOL, "The pool is 2 metres deep.", "invented"),
    (POOL, "The hotel has 12 stars.", "invented"),  # 12 is in the document, but not an answer
    (POOL, "The hotel has a pool.", "missing"),
]


@pytest.mark.parametrize(("question", "answer", "label"), LABELLED)
def test_each_hand_labelled_answer_scores_as_labelled(
    question: Question, answer: str, label: str
) -> None:
    assert score(answer, question, DOCUMENT) == label


def test_the_tally_counts_each_score() -> None:
    tally = Tally()
    for question, answer, _ in LABELLED:
        tally.add(score(answer, question, DOCUMENT))
    assert tally.counts == {"right": 7, "missing": 4, "invented": 8} and tally.total == 19


def test_grounding_names_what_the_document_does_not_hold() -> None:
    assert ungrounded("Giulia Ferraris sold it in 2019 to the Conti family.", DOCUMENT) == []
    assert ungrounded("Paolo Rossi sold it in 2021.", DOCUMENT) == ["2021", "Paolo Rossi"]
    assert ungrounded("Yes. It has 48 rooms.", DOCUMENT) == []  # sentence starts name nothing


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ({"accept": ["x"]}, "question"),
        ({"question": "Q?"}, "accept"),
        ({"question": "Q?", "accept": ["x"], "absent": True}, "accept"),
        ({"question": "Q?", "accept": "x"}, "list"),
        ({"question": "Q?", "accept": ["("]}, "pattern"),
        ({"question": "Q?", "absent": "yes"}, "absent"),
    ],
)
def test_a_malformed_exam_line_is_refused_with_what_is_wrong(line: dict, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        read_exam([line])


def test_the_example_exam_reads_and_its_answers_are_in_its_document() -> None:
    """Every fact the shipped exam accepts is in its document, and its absent questions are
    not (a wrong example would score models wrongly)."""
    from reame_bench.exam_runner import EXAM_DIR, load_exam

    document, questions = load_exam(EXAM_DIR / "hotel.txt", EXAM_DIR / "hotel.jsonl")
    assert len(questions) == 12 and sum(q.absent for q in questions) == 2
    for question in questions:
        if not question.absent:
            found = [p for p in question.accept if re.search(p, document, re.IGNORECASE)]
            assert found, question.question


def test_needles_are_planted_at_even_depths_and_each_asked() -> None:
    from reame_bench.exam_runner import plant_needles

    haystack = "\n\n".join(f"Paragraph {i} says nothing of doors." for i in range(20))
    document, questions = plant_needles(haystack, 4)
    paragraphs = document.split("\n\n")
    depths = [i for i, p in enumerate(paragraphs) if "door is" in p]
    assert depths == [4, 9, 14, 19] and len(questions) == 4
    for question, at in zip(questions, depths, strict=True):
        assert score(paragraphs[at], question, document) == "right"
    assert score(paragraphs[depths[1]], questions[0], document) == "invented"  # another door
    with pytest.raises(ValueError):
        plant_needles(haystack, 0)


def test_a_bad_exam_is_a_one_line_error(tmp_path) -> None:
    from test_cli import assert_one_line_error, reame

    document = tmp_path / "doc.txt"
    document.write_text("A document.")
    (tmp_path / "doc.jsonl").write_text('{"question": "Q?"}\n')
    url = ("--url", "http://127.0.0.1:9")
    assert_one_line_error(reame("bench", "--exam", str(tmp_path / "none.txt"), *url), "--exam")
    assert_one_line_error(reame("bench", "--exam", str(document), *url), "accept")
    assert_one_line_error(reame("bench", "--exam", str(document)), "--url")
