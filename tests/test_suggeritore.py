"""Il Suggeritore's suggestions, model-free: only form the text has set up, never content."""

from __future__ import annotations

import pytest

from reame.spec.suggeritore import suggest


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Steps:\n1. Boil water.\n2. Add the tea.\n", "3. "),
        ("  9) nine\n", "  10) "),
        ("- apples\n- pears\n", "- "),
        ("* one\n", "* "),
        ("1. **Oak**: tall\n2. **Pine**: green\n", "3. **"),  # the markup each item opens with
        ("1. The capital of France\n2. The capital of Spain\n", "3. The capital of "),
        ("1. Paris\n2. Pisa\n", "3. "),  # a shared letter is not a template
        ("- Oak\n- Oak\n", "- "),
        ("| a | b |\n|---|---|\n| 1 | 2 |\n", "|"),
        ('[{"name": "Ann", "age": 3}, {', '"name": '),
        ('[{"name": "Ann", "age": 3}, {"name": "Bo", ', '"age": '),
        ('[\n  {"name": "Ann", "age": 3},\n  {\n    "name": "Bo",\n    ', '"age": '),
        ('[{"a": "}{", "b": 1}, {"a": "x", ', '"b": '),  # braces inside strings do not count
    ],
)
def test_the_structure_set_up_so_far_is_suggested(text: str, expected: str) -> None:
    assert suggest(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A sentence of prose.\n",  # no structure
        "1. one\n\n",  # a blank line ends the list
        "The answer is",  # mid-line, no JSON
        '{"name": "Ann", ',  # an object with no earlier sibling
        '[{"name": "Ann"}, {"name": "Bo", ',  # every key of the sibling is written
        '[{"name": "Ann", "age": 3}, {"city": "Rome", ',  # keys in another order
    ],
)
def test_nothing_is_suggested_without_a_structure_to_follow(text: str) -> None:
    assert suggest(text) == ""
