"""How much of a free sequence's KV a request may reuse and still compute what a cold request
computes, token for token. Pure.

llama.cpp's CPU kernels take one of three paths for the queries of a sequence in a batch: one
query (a split-KV path once the cache is long), 2 to 63 (one row at a time), 64 or more (tiled
flash attention). Each rounds its own way. In the tiled path a query's result does not depend on
how many others share its batch; below it, it does (measured: a JSON answer changed when 33
prompt tokens of a 45-token chunk were reused and the other 12 computed as a chunk of their own,
tests/test_grammar_engine.py). So a reuse is exact when every position the request reuses was
computed, and every position it computes will be, in a chunk of 64 or more, as a cold request of
the same prompt computes it, or by the very same chunk on the same KV (a narrow chunk rounds
alike wherever it runs on the same KV). A cold request stops its chunks at its snapshot points
and at the token budget of a step, and computes a chunk that would run narrow, yet is at least
WIDE_ENOUGH tokens, as the TILED_QUERIES tokens before its end (those before it again): a warm
request does the same, so the rule keeps them alike.

The weights take paths of their own where llama.cpp repacks them (Q4_K and Q4_0 on x86 and
ARM): a chunk's rows are multiplied in groups of a few from its first, and the rows left over at
its end one at a time, each rounding its own way (measured on Gemma 3's Q4_K_M file: tiled
chunkings of one prompt gave its one chunk's logits in 2 of 12 tries, in 12 of 12 where every
chunk's groups of 4 fell as that chunk's). So where a chunk's rows come in groups of
`granule` (measured at start, engine/exact_run.py row_granule; 1 where nothing is repacked), a
position is alike in two chunks only where it is in a whole group in both, or left over in
both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

TILED_QUERIES = 64  # ggml-cpu's flash attention: tiled from this many queries of a sequence
TILED = 2  # path_of a chunk of TILED_QUERIES or more
# NOTE: from this many queries a narrow chunk costs more than the tiled TILED_QUERIES ending
# where it ends (SmolLM2 on 2 cores: 56 queries at 1.5k tokens of context 532 ms, tiled 64
# 355 ms; 40 about even at 300 tokens of context, 32 cheaper narrow below 1k): a fixed number,
# so that every process chunks a prompt alike
WIDE_ENOUGH = 40


class Computed(Protocol):
    """What a state's tokens were computed by: a resident sequence's (engine/slots.py Resident) or
    a saved one's (saved_state.py)."""

    @property
    def tokens(self) -> Sequence[int]: ...
    @property
    def known_ends(self) -> Sequence[int]: ...
    @property
    def chunks(self) -> Sequence[tuple[int, int]]: ...
    @property
    def prompt_length(self) -> int: ...
    @property
    def session(self) -> str: ...


def reuse_length(
    common: int,
    held: Computed,
    session: str,
    cold_cuts: Sequence[int],
    own_cuts: Sequence[int],
    num_prompt: int,
    budget: int,
    granule: int = 1,
) -> int:
    """How much of a computed state that shares `common` tokens with a prompt of `num_prompt`
    tokens a request goes on from, whatever holds it (a resident sequence, RAM, disk, the
    shared tier, a session): all of them (at most the prompt but its last token) where the
    request holds the whole prompt that computed the state, or the state is the request's own
    session's (a turn goes on from its session's KV, its answer computed a token at a time as
    no prompt is); else, where the prompt leaves the state inside the prompt that computed it
    (the same prompt again too: its last token computed alone would round otherwise than in a
    cold request's chunk), as much as stays exact (exact_reuse), on how its chunks were
    computed."""
    if common >= held.prompt_length or (session and session == held.session):
        return min(common, num_prompt - 1)
    return exact_reuse(
        common, held.known_ends, held.chunks, cold_cuts, own_cuts, num_prompt, budget, granule
    )


def path_of(width: int) -> int:
    """The kernel path of a chunk of `width` tokens of one sequence."""
    return 0 if width == 1 else 1 if width < TILED_QUERIES else 2


def chunks(start: int, end: int, cuts: Sequence[int], budget: int) -> list[tuple[int, int]]:
    """The chunks a sequence computes [start, end) in: stopping at each cut inside, at most
    `budget` tokens each (step_plan.plan_step, alone in its steps)."""
    out = []
    stops = sorted({c for c in cuts if start < c < end} | {end})
    at = start
    for stop in stops:
        while at < stop:
            step = min(budget, stop - at)
            out.append((at, at + step))
            at += step
    return out


def widened_start(start: int, end: int, budget: int) -> int:
    """Where a prompt chunk that ends at `end` is computed from: TILED_QUERIES before its end
    when [start, end) would run narrow but is WIDE_ENOUGH (the tokens before `start` computed
    again, in the tiled path), else `start`."""
    if WIDE_ENOUGH <= end - start < TILED_QUERIES <= min(end, budget):
        return end - TILED_QUERIES
    return start


def computed_chunks(
    start: int, end: int, cuts: Sequence[int], budget: int
) -> list[tuple[int, int]]:
    """The chunks that compute [start, end), each widened where plan_step widens it: they may
    begin before `start` and overlap the one before."""
    return [(widened_start(a, b, budget), b) for a, b in chunks(start, end, cuts, budget)]


def cuts_past(cuts: Sequence[int], reuse: int, num_prompt: int) -> list[int]:
    """The cuts (snapshot points) a request keeps when it goes on from `reuse` tokens: none
    less than a tiled chunk past it but the whole prompt. Such a cut would make its first
    chunk run narrow, or compute reused tokens again, for a snapshot hardly past what it
    reused (the snapshot policy's own rule, with the reuse as the base)."""
    return [c for c in cuts if c >= reuse + TILED_QUERIES or c == num_prompt]


def left_over(chunk: tuple[int, int], granule: int) -> int:
    """Where the rows of `chunk` left over after its whole groups of `granule` start."""
    a, b = chunk
    return b - (b - a) % granule


def _both_exact(
    x: Sequence[tuple[int, int]],
    y: Sequence[tuple[int, int]],
    lo: int,
    hi: int,
    granule: int = 1,
    gaps: bool = False,
) -> bool:
    """Every position in [lo, hi) is computed alike by both chunkings: in the tiled path by
    both, in a whole group of `granule` rows by both or left over by both, or by the very same
    chunk (the positions before it alike too, as checked from `lo` on: a narrow chunk rounds as
    it does wherever it runs on the same KV). Each must cover the range, but where `gaps`
    positions `x` does not cover are taken as alike; where chunks overlap, the later one
    computed the position again."""
    cx = [(a, b) for a, b in x if b > lo and a < hi][::-1]
    cy = [(a, b) for a, b in y if b > lo and a < hi][::-1]
    ends = {*(max(a, lo) for a, _ in cx + cy), *(min(b, hi) for _, b in cx + cy)}
    groups = {left_over(c, granule) for c in cx + cy if lo < left_over(c, granule) < hi}
    for at in sorted({lo, hi, *ends, *groups})[:-1]:
        chunk_x = next((c for c in cx if c[0] <= at < c[1]), None)
        chunk_y = next((c for c in cy if c[0] <= at < c[1]), None)
        if chunk_x is None and gaps:
            continue
        if chunk_x is None or chunk_y is None:
            return False
        if chunk_x == chunk_y:
            continue
        tiled = path_of(chunk_x[1] - chunk_x[0]) == path_of(chunk_y[1] - chunk_y[0]) == TILED
        grouped = (at >= left_over(chunk_x, granule)) == (at >= left_over(chunk_y, granule))
        if not (tiled and grouped):
            return False
    return True


def exact_reuse(
    common: int,
    resident_ends: Sequence[int],
    resident_chunks: Sequence[tuple[int, int]],
    cold_cuts: Sequence[int],
    own_cuts: Sequence[int],
    num_prompt: int,
    budget: int,
    granule: int = 1,
) -> int:
    """How much of a free sequence's KV to reuse: all `common` tokens it shares with the prompt (at
    most the prompt but its last token) when every token stays in the tiled path where a cold
    request computes it (or in the very chunk a cold request computes it in), else the most of
    them that leaves the first chunk it computes TILED_QUERIES wide when that holds, else the
    last of its chunk ends within them from which the rest is computed as a cold request
    computes it, else none where computing the whole prompt is, else the last chunk end.
    `resident_ends`: where its chunks ended (and where it went on from); `resident_chunks`:
    the chunks that computed its prompt, as far as known; `cold_cuts`: the prompt's snapshot
    points on an empty cache; `own_cuts`: this request's (it computes from the reuse to the
    prompt's end, cut at cuts_past it); `granule`: the rows a chunk computes in groups (as
    far as 2 * (granule - 1) fewer are tried, so that its rows left over fall where a cold
    request's do)."""
    common = min(common, num_prompt - 1)
    at_end = max((e for e in resident_ends if e <= common), default=0)
    cold = computed_chunks(0, num_prompt, cold_cuts, budget)
    # NOTE: where the rest would start with a chunk too narrow for the tiled path (before a
    # cut or the prompt's end), it may start TILED_QUERIES tokens before that cut instead:
    # those are computed again, tiled, as a cold request computes them
    stops = [c - TILED_QUERIES for c in (*own_cuts, num_prompt) if c > TILED_QUERIES]
    tried = {common, *(s for s in stops if s < common)}
    # NOTE: back past a resident's rows left over (granule - 1 at most), then to where its own
    # rows left over fall as a cold request's (as many again)
    tried = {r - i for r in tried for i in range(2 * granule - 1) if r - i > 0}
    # NOTE: a chunk end of the resident is tried as any point is: where it went on from
    # another state it is an end, yet the rest from there may be computed otherwise than a
    # cold request computes it (measured: 17 tokens narrow where a cold request went tiled)
    tried |= {0, *(e for e in resident_ends if e <= common)}
    for reuse in sorted(tried, reverse=True):
        # NOTE: a request that reuses nothing keeps all its cuts (it is not started from a state)
        kept = cuts_past(own_cuts, reuse, num_prompt) if reuse else own_cuts
        own = computed_chunks(reuse, num_prompt, kept, budget)
        # NOTE: a widened first chunk computes again the resident's tokens from `first` on
        first = min(reuse, own[0][0])
        # NOTE: before a chunk end, positions whose chunk is not known are taken as computed
        # as a cold request computes them (it went on from there); those whose chunk is known
        # are checked, a later chunk widened back over them too
        known = min(at_end, reuse)
        if (
            _both_exact(resident_chunks, cold, 0, min(known, first), granule, gaps=True)
            and _both_exact(resident_chunks, cold, known, max(known, first), granule)
            and _both_exact(own, cold, first, num_prompt, granule)
        ):
            return reuse
    # NOTE: its own cuts part from the cold request's however much it reuses: the last end
    return at_end
