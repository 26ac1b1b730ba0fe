"""The baseline Reame is measured against: the plainest greedy decode loop, in its own context."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reame.llama import Context, ContextShape, Model


@dataclass(slots=True, frozen=True)
class PlainRun:
    tokens: list[int]
    prefill_seconds: float
    decode_seconds: float  # from the first generated token to the last


def plain_greedy_loop(
    model: Model,
    prompt: Sequence[int],
    max_tokens: int,
    shape: ContextShape,
    stop_at_end: bool = True,
) -> PlainRun:
    """Prefill in chunks of shape.batch_size, then one token at a time, argmax over the logits,
    in a one-sequence context of shape's cells, batch and threads (its other fields unused).
    The generated tokens include the end-of-generation token when there is one."""
    context = Context(model, ContextShape(shape.num_cells, shape.batch_size, 1, shape.num_threads))
    try:
        out: list[int] = []
        started = time.perf_counter()
        for start in range(0, len(prompt), shape.batch_size):
            chunk = list(prompt[start : start + shape.batch_size])
            positions = range(start, start + len(chunk))
            wants_logits = [False] * (len(chunk) - 1) + [True]
            context.decode(chunk, positions, [0] * len(chunk), wants_logits)
        token = int(np.argmax(context.logits(-1)))
        first = time.perf_counter()
        position = len(prompt)
        while len(out) < max_tokens:
            out.append(token)
            if (stop_at_end and model.is_end_of_generation(token)) or len(out) == max_tokens:
                break
            context.decode([token], [position], [0], [True])
            position += 1
            token = int(np.argmax(context.logits(-1)))
        return PlainRun(out, first - started, time.perf_counter() - first)
    finally:
        context.close()
