"""The route key: what a proxy in front of several Reame replicas hashes so that every turn of a
conversation reaches the replica that holds its computed state, without reading request bodies.

Reame answers every chat with it in the `X-Reame-Route` header; a client that wants its first
call routed too computes the same key here (the standard library only, so any client can copy
it). The formula, for a chat:

    with a session id:  "s-" + sha256("session\\0" + session_id)[:24 hex]
    without:            "c-" + sha256(canonical JSON of [model, first two messages])[:24 hex]

where a message is reduced to its "role" and "content" exactly as sent (a string or a list of
parts), and canonical JSON is `json.dumps(..., sort_keys=True, separators=(",", ":"),
ensure_ascii=False)` encoded as UTF-8. The first two messages are the system prompt and the
first question: the turns of one conversation share them, and two conversations behind one
popular system prompt do not (a key of the system prompt alone would pile them all onto one
replica).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

ROUTE_HEADER = "X-Reame-Route"
_HEX_DIGITS = 24


def route_key(
    model: str, messages: Sequence[Mapping[str, Any]], session_id: str | None = None
) -> str:
    """The key of a chat: its session id's, else its model's and first two messages'."""
    if session_id:
        return "s-" + _digest("session\0" + session_id)
    start = [{"role": m.get("role"), "content": m.get("content")} for m in messages[:2]]
    canonical = json.dumps(
        [model, start], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return "c-" + _digest(canonical)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HEX_DIGITS]


def route_headers(
    model: str, messages: Sequence[Mapping[str, Any]] | None, session_id: str | None
) -> dict[str, str]:
    """The header a response carries: a chat's key, or a completion's if it has a session
    (without one, a proxy balances it as it likes)."""
    if messages is None and not session_id:
        return {}
    return {ROUTE_HEADER: route_key(model, messages or [], session_id)}
