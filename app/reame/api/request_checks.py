"""Checks on a parsed JSON body before it is validated. Pure.

JSON can carry a lone UTF-16 surrogate (`"\\udc80"`), and Python's json reads it into a str
that nothing downstream can encode: the tokenizer's UTF-8 encode raises. So every string of a
body, object keys included, is checked once, here, and such a body is a 400 naming the field.
"""

from __future__ import annotations

from reame.api.errors import ApiError


def is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False  # a surrogate: json.loads joins every valid pair into one code point
    return True


def _shown(part: object) -> str:
    """A path part as text any client can read, a lone surrogate written as `\\udXXX`."""
    return str(part).encode("utf-8", "backslashreplace").decode("utf-8")


Chain = tuple[object, "Chain"] | None  # a path, last step first: linear in the depth


def _dotted(chain: Chain) -> str:
    parts = []
    while chain is not None:
        part, chain = chain
        parts.append(_shown(part))
    return ".".join(reversed(parts))


def lone_surrogate_path(value: object) -> str | None:
    """The dotted path (`messages.0.content`) of the first string, or object key, of a parsed
    JSON value that holds a lone surrogate; None if there is none. Iterative: a body may be
    nested as deep as the JSON parser allows."""
    stack: list[tuple[Chain, object]] = [(None, value)]
    while stack:
        chain, item = stack.pop()
        if isinstance(item, str):
            if not is_text(item):
                return _dotted(chain)
        elif isinstance(item, dict):
            for key in item:
                if not is_text(key):
                    return _dotted((key, chain))
            stack.extend(((k, chain), v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend(((i, chain), v) for i, v in reversed(list(enumerate(item))))
    return None


def check_text(body: object) -> None:
    """Raise a 400 if any string of the body is not Unicode text."""
    path = lone_surrogate_path(body)
    if path is not None:
        raise ApiError(
            400,
            f"Invalid value for '{path}': the string holds a lone UTF-16 surrogate "
            "(a \\ud800-\\udfff escape without its pair), which is not text",
            path or None,
            "invalid_value",
        )
