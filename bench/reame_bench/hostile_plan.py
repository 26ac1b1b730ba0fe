"""What `reame bench --hostile` sends: the attacker's plan (handed to its process as JSON), the
bodies of the victim's and the attacker's requests, and the outcomes each attack may meet."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from reame_bench.workloads import filler_text, topics

PROMPTS, FLOOD, STALLED, SLOW, IDLE = "prompts", "flood", "stalled", "slow", "idle"
ATTACKS = (PROMPTS, STALLED, SLOW, IDLE, FLOOD)
CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
ANSWER_TOKENS = 16  # a victim's (and a flooder's) answer: exactly this long (ignore_eos)
STALL_RCVBUF = 4096  # a stalled reader's receive buffer (the kernel's minimum is about half)

# outcomes besides HTTP statuses (which are given as their number)
REFUSED = "refused"  # closed before any answer, at once: the server's max_connections
CLOSED = "closed"  # closed before an answer, later (a slow sender without its 408)
CUT_OFF = "cut_off"  # a stream never read that the server ended before its end
IDLE_CLOSED = "idle_closed"  # an idle connection the server closed
OPEN_AT_END = "open_at_end"  # held (or in flight) when the phase ended, then closed
FINISHED = "finished"  # a stream never read that was written to its end all the same
TIMEOUT = "timeout"  # no answer in REQUEST_TIMEOUT

# what each attack may meet; anything else (a 5xx above all) is a failure
EXPECTED: Mapping[str, frozenset[str]] = {
    # NOTE: 429 while the key holds every place it may: refused before its body is parsed
    PROMPTS: frozenset({"400", "413", "429", REFUSED, OPEN_AT_END}),
    FLOOD: frozenset({"200", "429", REFUSED, CLOSED, OPEN_AT_END}),
    STALLED: frozenset({CUT_OFF, "429", REFUSED, OPEN_AT_END}),
    # NOTE: a slow sender whose body came whole would be answered; none does within a run
    SLOW: frozenset({"408", "200", CLOSED, REFUSED, OPEN_AT_END}),
    IDLE: frozenset({IDLE_CLOSED, "408", REFUSED, OPEN_AT_END}),
}


@dataclass(frozen=True, slots=True)
class AttackPlan:
    """The attacker's orders. Sizes: `prompt_list` prompts in a huge completion, `flood`
    connections sending ordinary chats at once, `stalled` streams never read, `slow` senders,
    `idle` connections held open."""

    port: int
    key: str
    model: str
    attacks: tuple[str, ...]
    client_timeout: float
    max_places: int
    seconds: float
    prompt_list: int = 100_000
    flood: int = 12
    stalled: int = 16
    slow: int = 16
    idle: int = 300
    stall_tokens: int = 1500
    flood_pause: float = 0.1  # after a refusal: a flooder does not wait for Retry-After
    seed: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> AttackPlan:
        values = json.loads(text)
        values["attacks"] = tuple(values["attacks"])
        return cls(**values)


def question(seed: int, index: int) -> str:
    """A distinct short prompt (no two requests share more than the chat template)."""
    rng = random.Random(seed * 1_000_003 + index)
    return f"{rng.choice(topics(8))} {filler_text(rng.randrange(1 << 30), 4)}"


def short_chat(model: str, seed: int, index: int) -> dict[str, Any]:
    """The victim's request, and the flooder's: an ordinary chat of ANSWER_TOKENS tokens."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": question(seed, index)}],
        "max_tokens": ANSWER_TOKENS,
        "temperature": 0.0,
        "ignore_eos": True,
    }


def stalled_stream(model: str, seed: int, index: int, max_tokens: int) -> dict[str, Any]:
    """A long stream of big frames (20 logprobs a token) for a reader that never reads."""
    return short_chat(model, seed, index) | {
        "max_tokens": max_tokens,
        "stream": True,
        "logprobs": True,
        "top_logprobs": 20,
    }


def prompt_lists(model: str, length: int, max_places: int) -> list[dict[str, Any]]:
    """Completions that ask for far more than the server has: `length` one-word prompts with
    n 8 (over the list's cap), and as many prompts as it has places, n 8 (over its places)."""
    return [
        {"model": model, "prompt": ["word"] * length, "n": 8, "max_tokens": 16},
        {"model": model, "prompt": ["word"] * max_places, "n": 8, "max_tokens": 16},
    ]
