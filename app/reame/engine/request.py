"""What goes into the engine (a request) and what comes out of it (events)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING
from uuid import uuid4

from reame.sampling import SamplingParams
from reame.saved_state import Stored

if TYPE_CHECKING:
    from reame.grammar.matcher import Grammar


@dataclass(slots=True, frozen=True)
class ThoughtSpec:
    """A request whose answer may think first (engine/thought.py): the template's markers, the
    tokens the engine writes to close a thought, whether the prompt left one open, and how many
    tokens it may take (None: any)."""

    open: str
    close: str
    close_tokens: tuple[int, ...]
    is_open: bool
    budget: int | None = None
    # markers that are one token of the vocabulary, by id: their text, whatever piece() gives
    marker_ids: tuple[tuple[int, str], ...] = ()


@dataclass(slots=True)
class GenerationRequest:
    prompt: list[int]
    params: SamplingParams
    request_id: str = field(default_factory=lambda: uuid4().hex)
    # stored states a worker thread found for it: the engine picks what it goes on from
    # (engine/reuse_index.py)
    stored: tuple[Stored, ...] = ()
    keep_state: bool = False  # its final state goes to the engine's on_state, after its finish...
    keep_state_min_new: int = 0  # ...if it computed this many beyond what it restored
    # prompt lengths at which the engine hands the sequence's state to its snapshot hook
    snapshot_at: tuple[int, ...] = ()
    # prompt lengths its chunks also end at, with no state read there: where an answer starts,
    # so that the history computed ahead goes on from there (history_ahead.py)
    cut_at: tuple[int, ...] = ()
    # where a cold request of this prompt (on an empty cache) would end its chunks: what a
    # token-granular reuse must keep to (engine/exact_reuse.py)
    cold_cuts: tuple[int, ...] = ()
    # whose computed prefixes it may reuse and adds to: "" for all (tenancy "shared"), else a
    # bearer key's digest
    scope: str = ""
    owner: str = ""  # the bearer key's digest ("" without keys): whose share it runs in
    grammar: Grammar | None = None  # what the output must match; each sequence gets a matcher
    # warm-ahead (engine/warm_ahead.py): what the template puts after an answer before the next
    # question (its end of turn, the next user header), computed in idle time before its final
    # state is kept
    warm_ahead: tuple[int, ...] = ()
    # the session it is a turn of ("" for none): a turn may go on from its session's warming
    # sequence cut anywhere, as from the session's kept state
    session: str = ""
    thought: ThoughtSpec | None = None  # its answer may think first
    # idle-time work (a conversation's history computed ahead): admitted only while no other
    # request runs or waits
    background: bool = False


@dataclass(slots=True, frozen=True)
class TokenEvent:
    """One generated token and the text it made visible (may be empty while held back): of
    the answer in `text`, of its thought in `reasoning`."""

    token: int
    text: str
    logprob: float | None = None
    top_logprobs: tuple[tuple[int, float], ...] = ()
    reasoning: str = ""
    in_thought: bool = False  # the token is the thought's (its markers included)


class Finish(StrEnum):
    """Why a request ended (a str: it is also the name a client reads)."""

    STOP = "stop"
    LENGTH = "length"
    ABORT = "abort"
    ERROR = "error"
    BUSY = "busy"  # it waited too long for a sequence

    @property
    def is_whole(self) -> bool:
        """The answer ended by itself or by its length, not by a failure."""
        return self in (Finish.STOP, Finish.LENGTH)


@dataclass(slots=True, frozen=True)
class FinishEvent:
    """The last event of a request."""

    reason: Finish
    text: str  # text that was held back until the end
    num_prompt_tokens: int
    num_completion_tokens: int
    num_cached_tokens: int = 0
    error: str | None = None
    # its draft tokens verified: in its answer, and not (OpenAI's accepted and rejected
    # prediction tokens)
    num_accepted_drafts: int = 0
    num_rejected_drafts: int = 0
    reasoning: str = ""  # the thought's text held back until the end (it was cut short)
    num_reasoning_tokens: int = 0
    is_request_fault: bool = False  # an ERROR the request caused (its grammar): a 4xx
    stop_sequence: str | None = None  # the stop string that ended it (the Messages API says)
    # every step computed it as it computes alone (engine/exact_steps.py): its answer is what
    # the same request alone writes, and may be kept (api/answer_memory.py)
    is_exact: bool = False


Event = TokenEvent | FinishEvent
Sink = Callable[[Event], None]
