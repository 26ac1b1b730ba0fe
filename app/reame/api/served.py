"""What a call needs of the server, and the checks of a request against its limits."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from reame.answer_memory import AnswerMemory
from reame.api.answer_key import ServerSide
from reame.api.call_memory import CallMemory
from reame.api.chat_turn import ThinkingDefaults
from reame.api.errors import ApiError
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.conclave.answers import RULES
from reame.engine.request import Finish, FinishEvent
from reame.service import Service


def num_prompts(body: ChatRequest | CompletionRequest) -> int:
    return 1 if isinstance(body, ChatRequest) else len(body.prompts())


@dataclass(slots=True)
class Served:
    """What a call needs of the server: the service, the sessions, the model's names."""

    service: Service
    model_id: str
    model_names: frozenset[str]
    max_n: int
    best_of: int = 1  # when a request does not say
    max_best_of: int = 8
    vote_on: str = "auto"  # the configured default: a rule's name or the operator's pattern
    # what a request may name in vote_on: a rule, or a pattern the operator configured
    vote_rules: Mapping[str, str | re.Pattern[str]] = field(
        default_factory=lambda: {r: r for r in RULES}
    )
    is_scoped_per_key: bool = False  # tenancy "per_key": prefixes are reused within a key
    thinking: ThinkingDefaults = field(default_factory=ThinkingDefaults)
    reasoning_inline: bool = False  # reasoning_format "inline": thoughts stay in content
    key_places: int | None = None  # request places one key may hold (None: no keys, no bound)
    explore: float = 0.7  # a Conclave's candidates after the first sample at least this warm
    held: dict[str, int] = field(default_factory=dict)  # places each key holds now
    memory: AnswerMemory | None = None  # the answer memory (None: off)
    fingerprint: str = ""  # the model file's and what its states depend on (the memory's key)

    def call_memory(
        self, body: ChatRequest | CompletionRequest, session_id: str | None, owner: str
    ) -> CallMemory | None:
        """A call's part in the answer memory; None while it is off, or the call opts out."""
        if self.memory is None or not body.answer_memory:
            return None
        service = self.service
        server = ServerSide(
            self.fingerprint,
            service.chat.template_source or "",
            owner if self.is_scoped_per_key else "",
        )
        return CallMemory(self.memory, server, body, session_id, service.model.vocab_size)

    def failure(self, finish: FinishEvent) -> ApiError:
        """The HTTP error of an answer that did not come whole."""
        if finish.reason == Finish.BUSY:
            message = finish.error or "no sequence came free in time; retry shortly"
            return ApiError(429, message, code="server_busy", headers={"retry-after": "1"})
        if finish.is_request_fault:  # its own grammar failed: the client's to change
            return ApiError(400, finish.error or "the grammar failed", "grammar", "grammar_failed")
        if (failure := self.service.failure) is not None:
            # NOTE: a 500, not the 503 a proxy retries on another replica: this request may be
            # what killed the engine (new calls to this replica get 503s: they never ran)
            return ApiError(500, failure, code="engine_failed")
        if finish.reason == Finish.ABORT:
            return ApiError(503, "the server stopped before the answer was complete")
        return ApiError(500, finish.error or "the answer failed; the server log has the details")

    def candidates(self, body: ChatRequest | CompletionRequest, session_id: str | None) -> int:
        """How many candidates vote (1: no Conclave); a 400 for what a Conclave cannot do."""
        served = self
        if body.best_of is None:  # NOTE: the configured default only where it can apply
            simple = body.n == 1 and session_id is None and num_prompts(body) == 1
            return served.best_of if simple else 1
        limit = served.max_best_of  # NOTE: candidates beyond the free sequences wait for one
        if body.best_of > limit:
            raise ApiError(
                400,
                f"best_of is {body.best_of}, above this server's limit of {limit} (max_best_of)",
                "best_of",
                "invalid_value",
            )
        if body.best_of > 1:
            for reason, ok in (
                ("n must be 1 with best_of", body.n == 1),
                ("best_of takes one prompt", num_prompts(body) == 1),
                ("best_of cannot be used with a session", session_id is None),
            ):
                if not ok:
                    raise ApiError(400, reason, "best_of", "invalid_value")
        return body.best_of

    def check_room(self, body: ChatRequest | CompletionRequest, best_of: int) -> None:
        """Refuse, before anything is rendered or tokenized, a request that needs more
        sequences (prompts x n x best_of) than the server has places: a 400 if it never could
        have them, a 429 if they are taken now."""
        engine = self.service.engine
        places = num_prompts(body) * body.n * best_of
        if places > engine.max_places:
            raise ApiError(
                400,
                f"this request needs {places} sequences (prompts x n x best_of) but the server "
                f"has {engine.max_places} places in all (parallel + max_waiting)",
                "n",
                "invalid_value",
            )
        if places > engine.num_free_places:
            raise ApiError(
                429,
                f"this request needs {places} sequences and {max(engine.num_free_places, 0)} "
                "are free; retry shortly",
                code="server_busy",
                headers={"retry-after": "1"},
            )

    def check_key_room(self, owner: str) -> None:
        """A key that holds every place it may is refused before its body is even parsed (a
        client that sends again at once after a 429 costs no more than that)."""
        self.take_places(owner, 1, dry_run=True)

    def take_places(self, owner: str, places: int, dry_run: bool = False) -> None:
        """Count a call's places against its key's share; a 429 past it (the other keys are
        still served). Each taking is given back by `give_back_places`."""
        if not owner or self.key_places is None:
            return
        held = self.held.get(owner, 0)
        if held + places > self.key_places:
            raise ApiError(
                429,
                f"this key holds {held} of the {self.key_places} request places one key may "
                "hold (key_share); retry when its requests end",
                code="key_quota",
                headers={"retry-after": "1"},
            )
        if not dry_run:
            self.held[owner] = held + places

    @contextlib.asynccontextmanager
    async def place(self, owner: str) -> AsyncIterator[None]:
        """One place of the key's share held while work off the engine runs (a body
        tokenized, a template rendered): a key cannot keep more of the CPU busy either."""
        self.take_places(owner, 1)
        try:
            yield
        finally:
            self.give_back_places(owner, 1)

    def give_back_places(self, owner: str, places: int) -> None:
        if owner and self.key_places is not None:
            left = self.held.get(owner, 0) - places
            if left > 0:
                self.held[owner] = left
            else:
                self.held.pop(owner, None)

    def check_prompt_list(self, body: dict[str, object]) -> None:
        """The cap on a completion's prompt list, on the raw JSON before it is validated (each
        prompt would be validated, walked and tokenized): the places bound it."""
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or all(isinstance(x, int) for x in prompt[:1]):
            return
        limit = self.service.engine.max_places
        if len(prompt) > limit:
            raise ApiError(
                400,
                f"the prompt list holds {len(prompt)} prompts; this server takes at most "
                f"{limit} in one request (its parallel + max_waiting places)",
                "prompt",
                "invalid_value",
            )

    def vote_rule(self, name: str | None) -> str | re.Pattern[str]:
        """A request names a rule; it never sends a pattern to run here (a pattern can take
        exponential time, on the event loop): patterns come from the operator's vote_rules."""
        rules = self.vote_rules
        if name is None:
            default = self.vote_on
            return rules.get(default) or re.compile(default)
        if name not in rules:
            raise ApiError(
                400,
                f"vote_on: not a rule of this server ({', '.join(rules)}); regular expressions "
                "are configured by name in vote_rules, not sent in a request",
                "vote_on",
                "invalid_value",
            )
        return rules[name]
