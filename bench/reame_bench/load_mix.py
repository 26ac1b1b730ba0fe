"""The seeded mix of requests `reame bench --load` and `--soak` send: which kind the i-th
request is and its exact body, a pure function of (seed, i), so a run can be sent again and the
mix is testable without a server."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reame_bench.workloads import filler_text, topics

CHAT = "chat"
STREAM = "stream"
DROP = "drop"  # a stream the client closes after a few tokens
CONCLAVE = "conclave"
SESSION = "session"
TOO_LARGE = "too_large"  # a body over max_body_bytes
TOO_LONG = "too_long"  # a prompt longer than the context
MALFORMED = "malformed"
KINDS = (CHAT, STREAM, DROP, CONCLAVE, SESSION, TOO_LARGE, TOO_LONG, MALFORMED)

# the engine may answer any of these with 429 when every sequence and waiting place is taken
_QUEUED = frozenset({200, 429})
EXPECTED: Mapping[str, frozenset[int]] = {
    CHAT: _QUEUED,
    STREAM: _QUEUED,
    DROP: _QUEUED,
    CONCLAVE: _QUEUED,
    SESSION: _QUEUED,
    TOO_LARGE: frozenset({413}),
    # NOTE: a full server answers 429 before it tokenizes (room is the cheap check, made
    # first); the retry then gets the 400
    TOO_LONG: frozenset({400, 429}),
    MALFORMED: frozenset({400}),
}

LOAD_WEIGHTS: Mapping[str, int] = {
    CHAT: 20,
    STREAM: 20,
    DROP: 12,
    CONCLAVE: 8,
    SESSION: 12,
    TOO_LARGE: 8,
    TOO_LONG: 8,
    MALFORMED: 12,
}
# steady traffic: mostly real work, a little of every hostile kind
SOAK_WEIGHTS: Mapping[str, int] = {
    CHAT: 30,
    STREAM: 25,
    DROP: 10,
    CONCLAVE: 8,
    SESSION: 15,
    TOO_LARGE: 3,
    TOO_LONG: 3,
    MALFORMED: 6,
}

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True, slots=True)
class MixShape:
    """What the bodies are sized against: the server's model name, body limit and context."""

    model: str
    max_body_bytes: int
    context_tokens: int
    max_tokens: int = 16
    num_sessions: int = 8  # shared by all clients, so one session is sometimes used twice at once

    def __post_init__(self) -> None:
        # a filler word is about one token and under 8 bytes with its space
        if self.context_tokens * 2 * 8 + 4096 >= self.max_body_bytes:
            raise ValueError(
                f"a prompt longer than {self.context_tokens} tokens would not fit a body of "
                f"{self.max_body_bytes} bytes: the too_long requests would be too_large ones"
            )


@dataclass(frozen=True, slots=True)
class Planned:
    """One request: `drop_after` content chunks are read before the client closes the
    connection (0: read to the end)."""

    index: int
    kind: str
    content: bytes
    is_stream: bool
    drop_after: int = 0
    path: str = CHAT_PATH

    @property
    def expected(self) -> frozenset[int]:
        return EXPECTED[self.kind]


def plan(
    seed: int, index: int, shape: MixShape, weights: Mapping[str, int] = LOAD_WEIGHTS
) -> Planned:
    rng = random.Random(seed * 1_000_003 + index)
    kind = rng.choices(list(weights), weights=list(weights.values()))[0]
    body, drop_after = _BUILDERS[kind](rng, shape, seed)
    if isinstance(body, bytes):
        return Planned(index, kind, body, is_stream=False)
    content = json.dumps(body).encode()
    return Planned(index, kind, content, bool(body.get("stream")), drop_after)


Body = dict[str, Any] | bytes


def _question(rng: random.Random) -> list[dict[str, str]]:
    topic = rng.choice(topics(8))
    return [{"role": "user", "content": f"{topic} {filler_text(rng.randrange(1 << 30), 3)}"}]


def _chat(rng: random.Random, shape: MixShape, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": shape.model,
        "messages": _question(rng),
        "max_tokens": rng.randint(4, shape.max_tokens),
        "temperature": rng.choice((0.0, 0.7)),
        "seed": rng.randrange(1 << 31),
    }
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def _plain(rng: random.Random, shape: MixShape, _: int) -> tuple[Body, int]:
    return _chat(rng, shape), 0


def _stream(rng: random.Random, shape: MixShape, _: int) -> tuple[Body, int]:
    return _chat(rng, shape, stream=True), 0


def _drop(rng: random.Random, shape: MixShape, _: int) -> tuple[Body, int]:
    # long enough that the drop comes mid-stream, whatever the model would write
    body = _chat(rng, shape, stream=True) | {"max_tokens": 4 * shape.max_tokens, "ignore_eos": True}
    return body, rng.randint(1, 3)


def _conclave(rng: random.Random, shape: MixShape, _: int) -> tuple[Body, int]:
    body = _chat(rng, shape, stream=rng.random() < 0.25)
    return body | {"best_of": 2, "temperature": 0.8}, 0


def _session(rng: random.Random, shape: MixShape, seed: int) -> tuple[Body, int]:
    k = rng.randrange(shape.num_sessions)
    # a fixed opening per session (long enough to be worth keeping), a new question each turn
    opening = {"role": "system", "content": filler_text(seed * 7919 + k, 80)}
    body = _chat(rng, shape, stream=rng.random() < 0.5)
    body["messages"] = [opening, *body["messages"]]
    return body | {"session_id": f"load-{seed}-{k}"}, 0


def _too_large(rng: random.Random, shape: MixShape, _: int) -> tuple[Body, int]:
    text = filler_text(rng.randrange(1 << 30), 64)
    repeats = shape.max_body_bytes // (len(text) + 1) + 2
    body = _chat(rng, shape) | {
        "messages": [{"role": "user", "content": " ".join([text] * repeats)}]
    }
    return body, 0


def _too_long(rng: random.Random, shape: MixShape, _: int) -> tuple[Body, int]:
    text = filler_text(rng.randrange(1 << 30), 2 * shape.context_tokens)
    return _chat(rng, shape) | {"messages": [{"role": "user", "content": text}]}, 0


def _malformed(rng: random.Random, shape: MixShape, _: int) -> tuple[Body, int]:
    good = _chat(rng, shape)
    variants: list[bytes] = [
        b"{not json",
        json.dumps(good).encode()[:-7],  # cut short
        b"[1, 2, 3]",
        b"",
        b"\xff\xfe{\x00\x80",  # not UTF-8
        json.dumps(good | {"messages": "hello"}).encode(),
        json.dumps(good | {"max_tokens": -5}).encode(),
        json.dumps(good | {"no_such_field": 1}).encode(),
        json.dumps(good | {"messages": [{"role": "wizard", "content": 3}]}).encode(),
        json.dumps({"messages": good["messages"]}).encode(),  # no model
    ]
    return rng.choice(variants), 0


_BUILDERS = {
    CHAT: _plain,
    STREAM: _stream,
    DROP: _drop,
    CONCLAVE: _conclave,
    SESSION: _session,
    TOO_LARGE: _too_large,
    TOO_LONG: _too_long,
    MALFORMED: _malformed,
}
