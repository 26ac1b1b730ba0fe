"""How many tokens of one sequence a batch may hold and still give, row for row, the logits that
computing them one at a time gives: measured on the context itself, before it serves.

llama.cpp's CPU kernels take other paths for larger batches, and the path depends on the
machine: on an Intel Sapphire Rapids VM a batch of up to 7 tokens of a synthetic Qwen3.5 2B
was bit-identical to one-token steps, on an AMD EPYC VM only up to 3 (its Qwen2.5 7B too:
logits 0.59 apart at 4). A verify run longer than that can change greedy output (a near tie
decided by rounding), so the engine keeps verify runs within what this probe measured.

The path also depends on how long the context is: with f16 K/V, llama.cpp's CPU flash attention
computes a lone one-token decode by splitting the KV across threads once the cache passes 256
cells, and a batch of queries otherwise (SmolLM2 here: a run of 2 is exact up to position 255,
none past it). So the probe also finds, by bisection up to LONG_PROBE tokens, the first position
a verify run may not reach; no draft goes past it (a q8_0 cache takes no such path: no limit).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import structlog

from reame.engine.exact_steps import ExactPaths
from reame.engine.kv_context import KVContext
from reame.speculation.controller import SpecController

PROBE_LIMIT = 8  # the longest run measured; beyond it the drafters' own limits apply
# NOTE: past the 256 cells where llama.cpp (this version) moves a lone f16 decode to its split
# path; a longer probe would cost a large model seconds of prefill at every start
LONG_PROBE = 320
# NOTE: where that happens here: tried first, it leaves the bisection two steps (a decode of a
# large model is a large part of a second)
LIKELY_UNTIL = 256
# what the probe feeds the model: any ids every vocabulary has (the kernels' paths depend on
# the batch's shape, not on which tokens are in it)
_PROBE_PROMPT = [2, 3, 4]
_PROBE_RUN = list(range(10, 10 + PROBE_LIMIT))
# NOTE: a tiled chunk (exact_reuse.TILED_QUERIES) of a multiple of every granule measured, and
# the one a row shorter leaves 1, 3, 7 or 15 rows over: which tells the granule apart
GROUPED_ROWS = 80
log = structlog.get_logger("reame.engine")


def probe_paths(context: KVContext, controller: SpecController | None, paths: ExactPaths) -> None:
    """Measure what computes as a lone sequence's one-token steps here: the longest exact
    run, how far into a context a run stays exact, how many sequences of one token a batch may
    hold, into `paths`; and keep `controller`'s drafts within the first two."""
    run = longest_exact_run(context, _PROBE_PROMPT, _PROBE_RUN)
    per_sequence = context.shape.num_cells // context.shape.num_sequences
    # NOTE: the position is found on runs of two: where none is exact it cannot be, and no
    # step beside another is taken as exact (0)
    until = exact_until(context, min(LONG_PROBE, per_sequence - 2)) if run > 1 else 0
    paths.run, paths.until = (run if run < PROBE_LIMIT else None), until
    paths.neighbours = exact_neighbours(context, context.shape.num_sequences)
    if controller is not None:
        _cap(controller, paths)
    log.info("exact paths measured", max_run=run, until=until, neighbours=paths.neighbours)


def _cap(controller: SpecController, paths: ExactPaths) -> None:
    if paths.run is not None:
        controller.max_length = min(controller.max_length, paths.run - 1)
        log.info(
            "verify runs kept short: longer batches round otherwise here",
            max_run=paths.run,
            max_drafts=controller.max_length,
        )
    if paths.run != 1 and paths.until:
        controller.exact_until = paths.until
        log.info("no drafts past a position: runs there round otherwise here", position=paths.until)


def exact_neighbours(context: KVContext, limit: int) -> int:
    """The largest m <= limit such that one llama_decode of one token for each of m sequences
    gives each the logits it gets alone, for every m' <= m (1 at least). Uses sequences
    0..limit-1 and empties them."""
    n = min(limit, context.shape.num_sequences)
    if n < 2:
        return 1
    at = len(_PROBE_PROMPT)
    alone = []
    try:
        for s in range(n):
            _start(context, _PROBE_PROMPT, s)
            context.decode([_PROBE_RUN[s % PROBE_LIMIT]], [at], [s], [True])
            alone.append(np.array(context.logits(0), copy=True))
        exact = 1
        for m in range(2, n + 1):
            for s in range(m):
                if not context.remove(s, at):
                    _start(context, _PROBE_PROMPT, s)
            tokens = [_PROBE_RUN[s % PROBE_LIMIT] for s in range(m)]
            context.decode(tokens, [at] * m, list(range(m)), [True] * m)
            if not all(np.array_equal(context.logits(j), alone[j]) for j in range(m)):
                break
            exact = m
    finally:
        for s in range(n):
            context.clear(s)
    return exact


def longest_exact_run(
    context: KVContext, prompt: Sequence[int], probe: Sequence[int], seq_id: int = 0
) -> int:
    """The largest k <= len(probe) such that a batch of probe[:j] after `prompt` gives the same
    logits, row for row, as computing the j tokens one at a time, for every j <= k (1 at
    least: one token is what decoding does). Uses sequence `seq_id` and empties it; the prompt
    is computed again before each batch, so that nothing is asked of memory that cannot be cut."""
    alone = []
    _start(context, prompt, seq_id)
    for i, token in enumerate(probe):
        context.decode([token], [len(prompt) + i], [seq_id], [True])
        alone.append(np.array(context.logits(0), copy=True))
    exact = 1
    try:
        for k in range(2, len(probe) + 1):
            _start(context, prompt, seq_id)
            positions = list(range(len(prompt), len(prompt) + k))
            context.decode(probe[:k], positions, [seq_id] * k, [True] * k)
            if not all(np.array_equal(context.logits(j), alone[j]) for j in range(k)):
                break
            exact = k
    finally:
        context.clear(seq_id)
    return exact


def exact_until(context: KVContext, length: int, seq_id: int = 0) -> int | None:
    """The first position a batch of a sequence's tokens may not reach and still give the
    logits one-token steps give: bisected over contexts up to `length` tokens, on runs of two
    (a longer run within it rounds alike, as the short probe measured); None if a run of two
    after `length` tokens is exact. Assumes that once a context is long enough to round
    otherwise, every longer one does. Uses sequence `seq_id` and empties it."""
    prompt = [10 + (7 * i) % 40 for i in range(length)]  # any ids every vocabulary has
    context.clear(seq_id)
    try:
        held = _hold(context, prompt, 0, length, seq_id)
        if _pair_exact(context, prompt, length, seq_id):
            return None
        exact, inexact = len(_PROBE_PROMPT), length
        guesses = [g for g in (LIKELY_UNTIL - 1, LIKELY_UNTIL - 2) if exact < g < inexact]
        while inexact - exact > 1:
            middle = guesses.pop(0) if guesses else (exact + inexact) // 2
            held = _hold(context, prompt, held, middle, seq_id)
            if _pair_exact(context, prompt, middle, seq_id):
                exact = middle
            else:
                inexact = middle
        return inexact + 1
    finally:
        context.clear(seq_id)


def row_granule(context: KVContext, seq_id: int = 0) -> int:
    """How many rows of a prompt chunk the weights are multiplied in groups of (1, 2, 4, 8 or
    16): llama.cpp computes the rows left over at a chunk's end otherwise where it repacks the
    weights (engine/exact_reuse.py). Found as where a tiled chunk one row shorter first gives
    other logits than the same rows in a chunk of GROUPED_ROWS; 1 when no row differs (or the
    batch or a sequence's cells are too few to measure). Uses sequence `seq_id` and empties it."""
    n = GROUPED_ROWS
    per_sequence = context.shape.num_cells // context.shape.num_sequences
    if min(context.shape.batch_size, per_sequence) < n:
        return 1
    prompt = [10 + (7 * i) % 40 for i in range(n)]  # any ids every vocabulary has
    compared = range(n - 17, n - 1)  # NOTE: the rows groups of 16 leave over, and one before
    try:
        rows = []
        for width in (n, n - 1):
            context.clear(seq_id)
            wants = [i in compared for i in range(width)]
            context.decode(prompt[:width], list(range(width)), [seq_id] * width, wants)
            rows.append([np.array(context.logits(j), copy=True) for j in compared])
    finally:
        context.clear(seq_id)
    first = next(
        (j for j, x, y in zip(compared, *rows, strict=True) if not np.array_equal(x, y)), None
    )
    if first is None:
        return 1
    granule = n - first  # NOTE: the rows left over are (n - 1) % granule = granule - 1
    if granule not in (2, 4, 8, 16):
        log.warning("rows of a chunk round otherwise than modelled", first_row=first)
        return 16
    return granule


def _pair_exact(context: KVContext, prompt: Sequence[int], at: int, seq_id: int) -> bool:
    """Whether two tokens after prompt[:at] (which the sequence holds) give, computed together,
    the logits they give one at a time; the sequence holds prompt[:at] again after it."""
    alone = []
    for i, token in enumerate(_PROBE_RUN[:2]):
        context.decode([token], [at + i], [seq_id], [True])
        alone.append(np.array(context.logits(0), copy=True))
    _hold(context, prompt, at + 2, at, seq_id)
    context.decode(_PROBE_RUN[:2], [at, at + 1], [seq_id] * 2, [True, True])
    exact = all(np.array_equal(context.logits(j), alone[j]) for j in range(2))
    _hold(context, prompt, at + 2, at, seq_id)
    return exact


def _hold(context: KVContext, prompt: Sequence[int], held: int, want: int, seq_id: int) -> int:
    """Make the sequence hold prompt[:want]: cut back to it (what it holds past `want` may be
    anything), or computed on from prompt[:held] in batches the context takes; from the start
    where its memory cannot be cut."""
    if want < held and not context.remove(seq_id, want):
        context.clear(seq_id)
        held = 0
    step = context.shape.batch_size
    for at in range(min(held, want), want, step):
        n = min(step, want - at)
        context.decode(prompt[at : at + n], list(range(at, at + n)), [seq_id] * n, [False] * n)
    return want


def _start(context: KVContext, prompt: Sequence[int], seq_id: int) -> None:
    context.clear(seq_id)
    n = len(prompt)
    context.decode(prompt, list(range(n)), [seq_id] * n, [False] * (n - 1) + [True])
