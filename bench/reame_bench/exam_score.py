"""Scoring a fact exam's answers against its document: right, missing or invented. Pure.

An exam is a document and questions. A question the document answers has `accept` patterns
(any one matching makes the answer right) and `reject` patterns (any one matching makes it
invented: a wrong value the model is known to give). A question the document cannot answer is
`absent`: the right answer says the document does not give it.

An answer no pattern decides is checked against the document (grounding): a number, a date or
a name it states that the document and the question do not hold is invented; otherwise it is
missing (the fact was not given, nor anything false in its place). To an absent question, any
number, date or name the question does not hold is invented. Patterns are regular
expressions, matched case-insensitively.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Score = Literal["right", "missing", "invented"]
SCORES: tuple[Score, ...] = ("right", "missing", "invented")

_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DATE = re.compile(rf"\b(?:\d{{1,2}} (?:{_MONTHS})|(?:{_MONTHS}) \d{{1,2}})\b", re.IGNORECASE)
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\s+|\n)\s*([A-Z][a-z]+)")
# words an answer may capitalize that name nothing in the document
_NOT_NAMES = frozenset(
    {
        "The",
        "A",
        "An",
        "It",
        "Its",
        "This",
        "That",
        "These",
        "Those",
        "There",
        "They",
        "He",
        "She",
        "We",
        "I",
        "You",
        "Yes",
        "No",
        "Not",
        "None",
        "According",
        "Based",
        "In",
        "On",
        "At",
        "For",
        "From",
        "To",
        "By",
        "As",
        "Of",
        "And",
        "Or",
        "But",
        "If",
        "Then",
        "So",
        "Answer",
        "Document",
        "Text",
        "Unknown",
        "Sorry",
    }
)
ABSENT_SAYS = re.compile(
    r"\b(?:not (?:mentioned|stated|given|specified|provided|included|found|say|said|known)"
    r"|(?:does|do|did)n[o']?t (?:say|mention|state|specify|give|provide|include)"
    r"|no (?:information|mention|data|answer)|unknown|cannot (?:be )?(?:determine|answer|tell)"
    r"|can't (?:determine|answer|tell)|isn't (?:mentioned|stated|given))",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    accept: tuple[str, ...] = ()
    reject: tuple[str, ...] = ()
    absent: bool = False  # the document cannot answer it

    @classmethod
    def from_json(cls, item: dict[str, object]) -> Question:
        """One JSONL line: {"question", "accept": [...], "reject": [...]} or {"question",
        "absent": true}; a line that is neither is a ValueError naming what is wrong."""
        question = item.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError("each line needs a non-empty 'question'")
        accept, reject = _patterns(item, "accept"), _patterns(item, "reject")
        absent = item.get("absent", False)
        if not isinstance(absent, bool):
            raise ValueError(f"{question!r}: 'absent' is true or false")
        if absent == bool(accept):
            raise ValueError(f"{question!r}: give 'accept' patterns, or 'absent': true")
        return cls(question, accept, reject, absent)


@dataclass(slots=True)
class Tally:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SCORES, 0))

    def add(self, score: Score) -> None:
        self.counts[score] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def score(answer: str, question: Question, document: str) -> Score:
    """Right, missing or invented (the module's docstring says how)."""
    if any(_search(p, answer) for p in question.reject):
        return "invented"
    if question.absent:
        if ABSENT_SAYS.search(answer):
            return "right"
        # NOTE: the document holds no answer, so any value given is made up, even one the
        # document holds elsewhere ("12 stars" where it says "12 June")
        return "invented" if ungrounded(answer, "", question.question) else "missing"
    if any(_search(p, answer) for p in question.accept):
        return "right"
    return "invented" if ungrounded(answer, document, question.question) else "missing"


def ungrounded(answer: str, document: str, question: str = "") -> list[str]:
    """The numbers, dates and names the answer states that neither the document nor the
    question holds (numbers compared without their thousands separators)."""
    known = f"{document}\n{question}"
    numbers = {_plain(n) for n in _NUMBER.findall(known)}
    found = [n for n in _NUMBER.findall(answer) if _plain(n) not in numbers]
    lowered = known.lower()
    found += [d for d in _DATE.findall(answer) if d.lower() not in lowered]
    starts = {m.group(1) for m in _SENTENCE_START.finditer(answer)}
    for name in _NAME.findall(answer):
        words = name.replace("-", " ").split()
        if all(w in _NOT_NAMES or w in starts for w in words):
            continue
        if name not in known and not all(w in known for w in words if w not in _NOT_NAMES):
            found.append(name)
    return found


def read_exam(lines: Iterable[dict[str, object]]) -> list[Question]:
    return [Question.from_json(item) for item in lines]


def _patterns(item: dict[str, object], key: str) -> tuple[str, ...]:
    value = item.get(key, [])
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise ValueError(f"'{key}' is a list of regular expressions")
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"'{key}' pattern {pattern!r}: {exc}") from exc
    return tuple(value)


def _search(pattern: str, text: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


def _plain(number: str) -> str:
    return number.replace(",", "").rstrip(".")
