"""What a candidate answered, pulled out of its text so answers can be compared: pure.

Rules: `number` (the last number, as arithmetic answers end), `choice` (a multiple-choice letter
A-E), `line` (the first line, normalized: a short answer), `json` (the parsed JSON, keys in
order: structured answers that differ only in layout agree), `auto` (a choice letter if the text
names one as its answer, else the last number, else the first line), or a regular expression
(its first group, or the whole match, of its last match).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation

RULES = ("auto", "number", "choice", "line", "json")
MAX_LINE_CHARS = 200  # a first line longer than this is not a short answer

_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?")
_CHOICE_NAMED = re.compile(r"(?i:answer|option|choice)\W{0,3}(?:is\W{0,3})?\(?([A-E])\b(?![a-z'])")
_CHOICE_OPENING = re.compile(r"^\W{0,3}\(?([A-E])(?:[).:]|\s*$|\s+-)")
# NOTE: stripped by hand, not by a regex: `[...]+$` tries every start of a long run of these
# and takes quadratic time on a line of dots that ends otherwise
_TRAILING_PUNCTUATION = ".!?,;:*_`\"'"
_LEADING = re.compile(r"^[\s*_`\"'#>-]+")


def compile_rule(rule: str) -> str | re.Pattern[str]:
    """A named rule as it is, or a compiled pattern; ValueError for a pattern that is not one."""
    if rule in RULES:
        return rule
    try:
        return re.compile(rule)
    except (re.error, OverflowError, RecursionError) as exc:  # a{4294967296}: OverflowError
        raise ValueError(
            f"not a rule ({', '.join(RULES)}) nor a regular expression: {exc}"
        ) from None


def extract(text: str, rule: str | re.Pattern[str] = "auto") -> str | None:
    """The answer in `text` by `rule`, normalized so equal answers compare equal; None: none."""
    if isinstance(rule, re.Pattern):
        return _by_pattern(text, rule)
    if rule == "number":
        return last_number(text)
    if rule == "choice":
        return choice(text)
    if rule == "line":
        return first_line(text)
    if rule == "json":
        return canonical_json(text)
    if rule == "auto":
        named = _CHOICE_NAMED.search(text)
        if named:
            return named.group(1)
        return last_number(text) or first_line(text)
    raise ValueError(f"unknown answer rule {rule!r}")


def last_number(text: str) -> str | None:
    """The last number, thousands separators dropped and trailing zeros too (`1,200.50` and
    `1200.5` are one answer)."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        value = Decimal(found[-1].replace(",", ""))
    except InvalidOperation:
        return None
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def canonical_json(text: str) -> str | None:
    """The JSON value of the text, keys sorted and no spaces; None if it is not JSON."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def choice(text: str) -> str | None:
    """A choice letter the text gives as its answer (`The answer is (B)`), or opens with (`C)
    because...`)."""
    m = _CHOICE_NAMED.search(text) or _CHOICE_OPENING.search(text)
    return m.group(1) if m else None


def first_line(text: str) -> str | None:
    """The first non-empty line, lower-cased, markup and end punctuation stripped, spaces
    collapsed; None if there is none or it is too long to be a short answer."""
    for line in text.splitlines():
        line = _strip_end(_LEADING.sub("", line))
        if line:
            return " ".join(line.lower().split()) if len(line) <= MAX_LINE_CHARS else None
    return None


def _strip_end(line: str) -> str:
    end = len(line)
    while end and (line[end - 1].isspace() or line[end - 1] in _TRAILING_PUNCTUATION):
        end -= 1
    return line[:end]


def _by_pattern(text: str, pattern: re.Pattern[str]) -> str | None:
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    value = m.group(1) if pattern.groups else m.group(0)
    return value.strip() if value and value.strip() else None
