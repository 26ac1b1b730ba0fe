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


def responses_chain(model: str, instructions: str | None, first_input: str) -> str:
    """The route part of a Responses chain's ids, from its first call: every response of the
    chain carries it (`resp_` + these 24 hex digits + its own), and its route key is
    "r-" + it. It is the digest HAProxy computes of the same three strings (docker/haproxy), so
    a chain's first call and the calls that name its ids reach the same replica:

        sha256(model + "|" + instructions + "|" + first input)[:24 hex]

    where the first input is `input` when it is a string, else the first item's `content`
    when that is a string, else empty (and a missing instructions is empty)."""
    return _digest(f"{model}|{instructions or ''}|{first_input}")


def first_input(body_input: object) -> str:
    """What responses_chain reads of a body's `input`."""
    if isinstance(body_input, str):
        return body_input
    if isinstance(body_input, list) and body_input and isinstance(body_input[0], dict):
        content = body_input[0].get("content")
        return content if isinstance(content, str) else ""
    return ""
