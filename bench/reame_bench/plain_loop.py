"""The baseline Reame is measured against: the plainest greedy decode loop, in its own context
(and, beside a running engine, in its own process)."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reame.llama.backend import set_llama_log_level
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model


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


class PlainLoopProcess:
    """plain_greedy_loop in a process of its own, on the model loaded there once.

    NOTE: not in the engine's process: libgomp gives each thread that calls llama_decode a team,
    and with more team threads than cores every team sleeps at each barrier, the engine's and
    the loop's alike (1-token steps 19 ms instead of 11 here), which would hide Reame's cost."""

    def __init__(self, model_path: Path) -> None:
        self._pool = ProcessPoolExecutor(
            1, multiprocessing.get_context("spawn"), _load_model, (str(model_path),)
        )

    def run(
        self, prompt: Sequence[int], max_tokens: int, shape: ContextShape, stop_at_end: bool = True
    ) -> PlainRun:
        return self._pool.submit(_run_loop, list(prompt), max_tokens, shape, stop_at_end).result()

    def close(self) -> None:
        self._pool.shutdown()

    def __enter__(self) -> PlainLoopProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_loaded: list[Model] = []  # the child process's model


def _load_model(path: str) -> None:
    set_llama_log_level("warning")
    _loaded.append(Model(Path(path)))


def _run_loop(
    prompt: list[int], max_tokens: int, shape: ContextShape, stop_at_end: bool
) -> PlainRun:
    return plain_greedy_loop(_loaded[0], prompt, max_tokens, shape, stop_at_end)
