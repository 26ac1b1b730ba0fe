"""One request inside the engine: its tokens, what of them is in the KV cache, and how it picks
and renders the next token."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from reame.detokenize import TextStream
from reame.engine.request import Event, GenerationRequest, Sink
from reame.engine.thought import Thought
from reame.grammar import Constraint
from reame.sampling import Sampler
from reame.saved_state import SavedState
from reame.spec.controller import RequestStats
from reame.spec.drafter import Drafter
from reame.spec.speculation import DraftParts


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

    @property
    def next_snapshot(self) -> int:
        """Where the next prompt chunk must stop, so a snapshot sees exactly that prefix; 0:
        nowhere."""
        return self.snapshots_due[0] if self.snapshots_due else 0

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
