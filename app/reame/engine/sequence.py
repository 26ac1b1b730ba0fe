"""One request inside the engine: its tokens, what of them is in the KV cache, and how it picks
and renders the next token."""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from reame.detokenize import TextStream
from reame.engine.exact_reuse import Computed, cuts_past
from reame.engine.request import Event, GenerationRequest, Sink
from reame.engine.thought import Thought
from reame.grammar.matcher import Constraint
from reame.sampling import Sampler
from reame.saved_state import SavedState
from reame.speculation.controller import RequestStats
from reame.speculation.drafter import Drafter
from reame.speculation.kit import DraftParts


class SeqState(StrEnum):
    WAITING = "waiting"  # queued for a free sequence
    FORK_WAITING = "fork_waiting"  # a group's candidate whose prompt is computed, for a sequence
    RUNNING = "running"  # in a llama sequence (a slot): computing its prompt or decoding
    # answered, still in its slot: the next turn's first tokens are computed when nothing else
    # runs (engine/warm_ahead.py)
    WARMING = "warming"
    FINISHED = "finished"


@dataclass(slots=True)
class Sequence:
    request: GenerationRequest
    sink: Sink
    sampler: Sampler
    text: TextStream
    tokens: list[int] = field(default_factory=list)  # the prompt and the tokens taken
    state: SeqState = SeqState.WAITING
    slot: int = -1  # llama seq_id while running
    num_computed: int = 0  # tokens[:num_computed] are in the KV cache
    num_cached: int = 0  # prompt tokens restored rather than computed
    num_forced: int = 0  # of the tokens not yet computed, the last ones a grammar forced
    is_aborted: bool = False
    is_paused: bool = False  # its reader stopped taking its tokens: it computes nothing
    queued_at: float = 0.0  # time.monotonic() when it was submitted
    snapshots_due: list[int] = field(default_factory=list)  # ascending prompt lengths
    cut_only: frozenset[int] = frozenset()  # of them, where a chunk ends but no state is read
    # where its prompt's chunks ended (and where a restore left off): a later request may
    # reuse this sequence's KV up to one of them and compute the rest as a cold request would
    chunk_ends: list[int] = field(default_factory=lambda: [0])
    # the prompt chunks (start, end) that computed its KV, here or in the sequence it went on
    # from; a restored state's are not known (engine/exact_reuse.py)
    chunks: list[tuple[int, int]] = field(default_factory=list)
    drafters: dict[str, Drafter] = field(default_factory=dict)  # none: no speculation
    # proposed tokens after `tokens`, computed and verified in the next step; never in `tokens`
    drafts: list[int] = field(default_factory=list)
    draft_parts: DraftParts = ()  # who drafted them
    # its own verify runs, by drafter: what the controller decides its drafts on
    draft_stats: dict[str, RequestStats] = field(default_factory=dict)
    # of its drafts verified: those in its answer, and those rolled back (or cut by its end)
    num_drafts_kept: int = 0
    num_drafts_refused: int = 0
    # the rest of a group sharing this prompt: they start from its KV once it is computed
    forks: list[Sequence] = field(default_factory=list)
    constraint: Constraint | None = None  # its place in its grammar, after all of `tokens`
    # tokens known before its first step (forced by its grammar): given out once that step ran,
    # so that a client's first token still means the prompt was computed; None: none held
    early_events: list[Event] | None = None
    thought: Thought | None = None  # its thought, while it may still come or runs
    # every step that computed it did so as it computes alone (engine/exact_steps.py)
    is_exact: bool = True
    # the logits its prompt's last token gave, kept while that was computed exactly: the same
    # prompt again picks its first token from them, computing nothing (engine/reuse_index.py)
    prompt_logits: np.ndarray | None = None

    def saved(self, data: bytes | bytearray) -> SavedState:
        """The state `data` of its KV (tokens[:num_computed]), with how they were computed."""
        n = self.num_computed
        return SavedState(
            tuple(self.tokens[:n]),
            data,
            tuple(e for e in self.chunk_ends if 0 < e <= n),
            tuple(c for c in self.chunks if c[1] <= n),
            min(self.num_prompt, n),
            self.request.session,
        )

    # -- its own changes: outside the scheduler, a sequence's fields change only through these

    def queued(self, now: float) -> None:
        self.queued_at = now

    def lead(self, followers: list[Sequence]) -> None:
        """The rest of a group start from this one's prompt: they keep no snapshots of it."""
        for seq in followers:
            seq.snapshots_due = []
        self.forks = followers

    def take_forks(self) -> list[Sequence]:
        forks, self.forks = self.forks, []
        return forks

    def placed(self, slot: int) -> None:
        """It holds llama sequence `slot` (-1: none)."""
        self.slot = slot

    def starts_at(
        self,
        num_cached: int,
        held: Computed | None = None,
        prompt_logits: np.ndarray | None = None,
        can_cut: bool = True,
    ) -> None:
        """It goes on from `num_cached` tokens already in its slot (computed by `held`, whose
        chunks up to there it inherits, as far as they are known), keeping the snapshot points
        past them that cuts_past keeps, or all of them where memory cannot be cut (`can_cut`
        False: a cold request keeps an answer's start however close, cache/prefix_reuse.py).
        `prompt_logits`: its whole prompt is there, and these are its last token's logits (its
        first token is picked from them)."""
        self.num_computed = self.num_cached = num_cached
        self.prompt_logits = prompt_logits
        self.chunk_ends = [e for e in held.chunk_ends if e < num_cached] if held else []
        self.chunk_ends.append(num_cached)
        self.chunks = [c for c in held.chunks if c[0] < num_cached] if held else []
        # NOTE: dropped where memory cannot be cut, its chunks parted from a cold request's:
        # at the Qwen3.5 2B shape 6 of 6 first turns behind a stored system prompt answered
        # otherwise than cold (docs/replay/stop59-hybrid-takeover)
        due = self.snapshots_due
        if can_cut:
            due = cuts_past(due, num_cached, self.num_prompt)
        self.snapshots_due = [p for p in due if p > num_cached]

    def computed(self, start: int, end: int) -> None:
        """A step computed tokens[start:end] into its KV (a prompt chunk is remembered: what a
        later request may reuse of it depends on how it was computed)."""
        if end <= self.num_prompt:
            self.chunk_ends.append(end)
            self.chunks.append((start, end))
        self.num_cached = min(self.num_cached, start)  # a widened chunk computed them again
        self.num_computed = min(end, len(self.tokens))
        self.num_forced = min(self.num_forced, len(self.tokens) - self.num_computed)

    def at_snapshot(self) -> bool:
        """Its KV holds exactly its next snapshot point (taken off the list), points it passed
        dropped (plan_step stops at them); a point that only cuts its chunks is not one."""
        due = self.snapshots_due
        while due and due[0] < self.num_computed:
            due.pop(0)
        if due and due[0] == self.num_computed:
            return due.pop(0) not in self.cut_only
        return False

    def interrupted(self, at: int) -> None:
        """A step that computed it from `at` was stopped: its KV holds tokens[:at] at most
        (engine/runner.py), and only the chunks that end there count."""
        self.num_computed = min(self.num_computed, at)
        self.num_cached = min(self.num_cached, at)
        self.chunk_ends = [e for e in self.chunk_ends if e <= self.num_computed]
        self.chunks = [c for c in self.chunks if c[1] <= self.num_computed]
        self.propose([])

    def computed_to(self, num_computed: int) -> None:
        """Its KV holds tokens[:num_computed] (cut back after a verify run)."""
        self.num_computed = num_computed

    def restart(self) -> None:
        """Its KV was emptied: everything is computed again (its answer's tokens in the
        prompt's chunks: its prompt's last logits are no longer what its KV gave)."""
        self.num_computed, self.chunk_ends, self.chunks = 0, [0], []
        self.prompt_logits = None

    def emptied(self) -> None:
        """A move on its KV failed and emptied it: everything is computed again, none of
        it reused."""
        self.restart()
        self.num_cached = 0
        self.propose([])  # NOTE: drafts proposed for a step that did not run

    def forked_from(
        self, num_computed: int, chunk_ends: Seq[int], chunks: Seq[tuple[int, int]]
    ) -> None:
        """Its KV is a copy of its group's prompt (none of it computed for this one), computed
        by the group's `chunks`: a later request reuses it as they computed it."""
        self.num_computed, self.num_cached = num_computed, self.num_prompt
        self.chunk_ends, self.chunks = list(chunk_ends), list(chunks)

    def prompt_computed(self, logits: np.ndarray) -> None:
        """Its prompt's last token gave `logits` (a view): kept, a copy, so that its slot can
        answer the same prompt again without a step, if they are what a cold request computes:
        every step was exact, and prompt chunks computed all of its KV (none of it an earlier
        turn's answer, decoded a token at a time, that it went on from)."""
        covered = _covered_to(self.chunks) >= self.num_prompt
        self.prompt_logits = logits.copy() if self.is_exact and covered else None

    def computed_otherwise(self) -> None:
        """A step computed it otherwise than it computes alone (engine/exact_steps.py), or it
        goes on from a prompt that was."""
        self.is_exact = False

    def answer_grammar(self) -> None:
        """Its thought ended: the grammar its thought held for the answer applies from here."""
        assert self.thought is not None
        self.constraint, self.thought.deferred = self.thought.deferred, None

    def take(self, token: int) -> None:
        self.tokens.append(token)

    def took_forced(self) -> None:
        """The token it took last was forced by its grammar: it is computed in a run."""
        self.num_forced += 1

    def propose(self, drafts: list[int], parts: DraftParts = ()) -> None:
        """Drafts to verify in the next step (none: [])."""
        self.drafts, self.draft_parts = drafts, parts

    def take_drafts(self, n: int) -> tuple[list[int], DraftParts]:
        """Its first `n` drafts and who drafted them, to verify; it keeps none."""
        drafts, parts = self.drafts[:n], self.draft_parts
        self.drafts = []
        return drafts, parts

    def verified(self, kept: int, refused: int) -> None:
        self.num_drafts_kept += kept
        self.num_drafts_refused += refused

    def to_warm(self, tail: list[int]) -> None:
        """Answered: what it took but never computed gives way to what warm-ahead computes."""
        del self.tokens[self.num_computed :]
        self.tokens.extend(tail)

    def warmed(self) -> None:
        """Its warm-ahead work ends where it is computed (all of it, or less when it yields)."""
        self.chunk_ends.append(self.num_computed)
        del self.tokens[self.num_computed :]

    def hold_events(self) -> None:
        """Its events wait until its first step ran (release_early)."""
        self.early_events = []

    def keep_early(self, event: Event) -> bool:
        """Hold `event` back if its events wait; False if they do not."""
        if self.early_events is None:
            return False
        self.early_events.append(event)
        return True

    def release_early(self) -> list[Event]:
        early, self.early_events = self.early_events, None
        return early or []

    @property
    def next_stop(self) -> int:
        """Where the next prompt chunk must stop, so a snapshot sees exactly that prefix; 0:
        nowhere."""
        return next((p for p in self.snapshots_due if p > self.num_computed), 0)

    @property
    def num_prompt(self) -> int:
        return len(self.request.prompt)

    @property
    def num_generated(self) -> int:
        return len(self.tokens) - self.num_prompt

    @property
    def is_decoding(self) -> bool:
        """Its prompt and every token taken but the last are computed: the next step samples."""
        return len(self.tokens) - self.num_computed == 1


def _covered_to(chunks: Seq[tuple[int, int]]) -> int:
    """How far from position 0 the chunks compute every position, without a gap."""
    at = 0
    for start, end in sorted(chunks):
        if start > at:
            break
        at = max(at, end)
    return at
