"""Il Suggeritore's suggestions, model-free: only form the text has set up, never content."""

from __future__ import annotations

import pytest

from reame.speculation.suggeritore import Suggeritore, suggest

FRUITS = (
    '{\n  "fruit1": {\n    "name": "Apple",\n    "price": 100\n  },\n'
    '  "fruit2": {\n    "name": "Banana",\n    "price": 120\n  },\n'
)
PRETTY = '[\n  {\n    "id": 1,\n    "name": "A"\n  },\n  {\n    "id": 2,\n    "name": "B"\n  },\n'


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
        ("1. A\n2. B\n3", ". "),  # the rest of an opening the model has begun
        ("   - x\n   - y\n  ", " - "),  # a newline token that took part of the indent
    ],
)
def test_the_next_line_opens_as_the_list_or_table_does(text: str, expected: str) -> None:
    assert suggest(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Step 1: Boil\nStep 2: Bake\n", "Step 3: "),
        ("| 1 | Alice | 30 |\n| 2 | Bob | 25 |\n", "| 3 | "),
        ("| 1 | Alice | 30 |\n| 2 | Bob | 25 |\n| 3", " | "),
        ('  {"id": 1, "name": "A"},\n  {"id": 2, "name": "B"},\n', '  {"id": 3, "name": "'),
        # blocks a blank line apart: numbered headings, list items
        ("## Step 1\nDo x.\n\n## Step 2\nDo y.\n\n", "## Step 3\n"),
        ("1. A\n\n2. B\n\n", "3. "),
    ],
)
def test_a_line_template_with_a_counter_is_written_one_further(text: str, expected: str) -> None:
    assert suggest(text) == expected


def test_lines_that_are_all_template_are_suggested_whole_several_at_a_time() -> None:
    assert suggest("1\n2\n") == "".join(f"{n}\n" for n in range(3, 11))
    assert suggest("Item 7 of 9\nItem 8 of 9\n").startswith("Item 9 of 9\nItem 10 of 9\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("| Name | Age |\n| --- |", " --- |\n| "),  # the separator row, cell by cell
        ("| Name | Age |\n|------|-----|", "\n|"),
        ("| Name | Age |\n|---|---|\n| Al | 3 |", "\n|"),  # a row with all its cells is done
    ],
)
def test_a_tables_separator_and_row_ends_follow_its_header(text: str, expected: str) -> None:
    assert suggest(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the next object's opening up to its first value (a string's opening quote)
        ('[{"name": "Ann", "age": 3}, {', '"name": "'),
        ('[{"name": "Ann", "age": 3}, {"name": "Bo", ', '"age": '),
        ('[{"name": "Ann", "age": 3}, {"name": "Bo", "a', 'ge": '),  # the key being written
        ('[\n  {"name": "Ann", "age": 3},\n  {\n    "name": "Bo",\n    ', '"age": '),
        ('[{"a": "}{", "b": 1}, {"a": "x", ', '"b": '),  # braces inside strings do not count
        # a finished value: its object closes and the array goes on as it did
        ('[{"name": "Ann", "age": 31}, {"name": "Bo", "age": 45', '}, {"name": "'),
        # a counter the objects keep moving on is written; other values are not
        (PRETTY, '  {\n    "id": 3,\n    "name": "'),
        (PRETTY + '  {\n    "id": 3,', '\n    "name": "'),
        # objects as the values of counted keys
        (FRUITS, '  "fruit3": {\n    "name": "'),
        (FRUITS + '  "fruit3": {\n    "name": "Pear",\n    "price": 130\n  }', ',\n  "fruit4": {'),
    ],
)
def test_a_json_object_follows_its_earlier_sibling(text: str, expected: str) -> None:
    assert suggest(text).startswith(expected)
    assert "Ann" not in suggest(text) and "Bo" not in suggest(text)  # values are content


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"a": 1}', "\n```"),
        ('Here:\n```json\n[{"a": "x"}, {"a": "y"}]', "\n```"),
        ('```json\n{"a": 1}\n```\n', ""),  # the fence is closed
    ],
)
def test_a_code_fence_closes_once_its_json_is_complete(text: str, expected: str) -> None:
    assert suggest(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "A sentence of prose.\n",  # no structure
        "Para one.\n\nPara two.\n\n",  # paragraphs that open alike are not a template
        "1. one\n\n",  # a blank line ends the list
        "The answer is",  # mid-line, no JSON
        '{"name": "Ann", ',  # an object with no earlier sibling
        '[{"name": "Ann"}, {"name": "Bo", ',  # every key of the sibling is written
        '[{"name": "Ann", "age": 3}, {"city": "Rome", ',  # keys in another order
        '[{"name": "Ann", "age": 31}, {"name": "Bo", "age": 4',  # a number that may go on
        '[{"name": "Ann", "age": 31}, {"name": "Bo',  # inside a string value
        '[{"name": "Ann"}, {"name": "Bo"}]\n```\n',  # the array is closed
    ],
)
def test_nothing_is_suggested_without_a_structure_to_follow(text: str) -> None:
    assert suggest(text) == ""


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


def drafter(num_prompt: int = 0) -> Suggeritore:
    """One token a character: its suggestions read back as text."""
    return Suggeritore(lambda t: chr(t).encode(), chars, num_prompt)


def test_the_drafter_tokenizes_the_suggestion_without_its_trailing_space() -> None:
    history = chars("Q?") + chars("1. Boil water.\n2. Add the tea.\n")
    assert drafter(num_prompt=2).propose(history, 8) == chars("3.")
    assert drafter(num_prompt=2).propose(history, 1) == chars("3")


def test_the_drafter_reads_only_the_answer_and_follows_it_as_it_grows() -> None:
    d = drafter(num_prompt=6)
    history = chars("1. a\n2.") + chars("Steps:\n")  # a list in the prompt is not the answer's
    assert d.propose(history, 8) == []
    for line in ("1. Boil water.\n", "2. Add the tea.\n"):
        history += chars(line)
    assert d.propose(history, 8) == chars("3.")
    history += chars("3. Pour.\n")
    assert d.propose(history, 8) == chars("4.")
