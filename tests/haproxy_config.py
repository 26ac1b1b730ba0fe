"""What an HAProxy config file says, read as HAProxy reads it (sections, then one directive a
line), and the checks every config Reame ships must pass at the edge: no replica taken out on
one error, no replay of a request a replica may have died of, the drain's 503 still retried, no
stats page without a login."""

from __future__ import annotations

import shlex

# retry-on conditions that resend a request a replica had already read (HAProxy's docs on
# retry-on: empty-response covers "a server crash or restart while processing the request")
REPLAYS = {"empty-response", "junk-response", "response-timeout", "all-retryable-errors"}
# status codes a replica answers to a request it did process (a 503 is a drain's "not served")
PROCESSED = {"500", "501", "502", "504"}


def sections(text: str) -> dict[str, list[list[str]]]:
    """{"defaults": [[word, ...], ...], "backend NAME": [...], ...}, comments dropped."""
    found: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    for line in text.splitlines():
        words = shlex.split(line.split("#", 1)[0]) if line.split("#", 1)[0].strip() else []
        if not words:
            continue
        if not line[:1].isspace():
            current = found.setdefault(" ".join(words[:2]), [])
            continue
        assert current is not None, f"a directive before any section: {line!r}"
        current.append(words)
    return found


def directives(text: str, name: str) -> list[tuple[str, list[str]]]:
    """Every (section, words) whose first word is `name`."""
    return [
        (section, words)
        for section, lines in sections(text).items()
        for words in lines
        if words[0] == name
    ]


def amplifications(text: str) -> list[str]:
    """What in this config turns one client's request into harm to more than one replica."""
    found = []
    for section, words in directives(text, "retry-on"):
        replays = (set(words[1:]) & REPLAYS) | (set(words[1:]) & PROCESSED)
        if replays:
            found.append(f"{section}: retry-on {' '.join(sorted(replays))} replays a request")
    for section, words in directives(text, "default-server") + directives(text, "server"):
        if "observe" not in words:
            continue
        on_error = words[words.index("on-error") + 1] if "on-error" in words else "fail-check"
        if on_error != "fastinter":
            # mark-down, sudden-death and fail-check each let errors alone (error-limit of
            # them, or two in a row with fall 2) take a replica out while /ready passes
            found.append(f"{section}: observe with on-error {on_error} takes a replica out")
    return found


def retry_conditions(text: str) -> set[str]:
    """The union of every retry-on's conditions (the default, conn-failure, if none)."""
    found = {word for _, words in directives(text, "retry-on") for word in words[1:]}
    return found or {"conn-failure"}


def open_stats_pages(text: str) -> list[str]:
    """Sections serving HAProxy's stats page without `stats auth`."""
    found = []
    for section, lines in sections(text).items():
        stats = [words[1] for words in lines if words[0] == "stats" and len(words) > 1]
        if ("enable" in stats or "uri" in stats) and "auth" not in stats:
            found.append(section)
    return found
