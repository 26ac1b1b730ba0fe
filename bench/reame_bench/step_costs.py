"""What one llama_decode costs here by its shape: a verify batch of k tokens of one sequence
(k = 2, 4, 8, 16) and one decode token each of S sequences (S = 2, 4, 8), as multiples of a
lone one-token step, after a prompt of `context` tokens. This is the figure speculation lives
on: where a k-token batch costs little more than one token (a model bound by memory bandwidth),
drafts are nearly free; where it costs k steps (bound by compute), they never pay."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from reame.llama.context import Context, ContextShape
from reame.llama.model import Model

VERIFY_SIZES = (2, 4, 8, 16)
SEQUENCE_COUNTS = (2, 4, 8)


@dataclass(slots=True, frozen=True)
class StepCosts:
    one_token_seconds: float
    verify: dict[int, float]  # k: a k-token batch of one sequence / a one-token step
    sequences: dict[int, float]  # S: one token each of S sequences / a one-token step
    kv_bytes_per_token: int  # of one sequence's state, measured (recurrent state included)
    state_bytes: int  # the state that does not grow with the context (recurrent layers)


def measure(
    model: Model, threads: int, context: int = 512, repeats: int = 5, seed_token: int = 1
) -> StepCosts:
    """Medians of `repeats` steps of each shape, each on a context of `context` tokens (the
    cut-back positions are removed between repeats; recurrent memory is restored instead)."""
    sequences = max(SEQUENCE_COUNTS)
    shape = ContextShape((context + 32) * sequences, max(VERIFY_SIZES), sequences, threads)
    ctx = Context(model, shape)
    try:
        prompt = [seed_token + (i % 50) for i in range(context)]
        for start in range(0, context, shape.batch_size):
            chunk = prompt[start : start + shape.batch_size]
            ctx.decode(
                chunk, range(start, start + len(chunk)), [0] * len(chunk), [False] * len(chunk)
            )
        for seq in range(1, sequences):
            ctx.copy(0, [seq])
        saved = [ctx.save_state(seq) for seq in range(sequences)]
        small = Context(model, ContextShape(64, 16, 1, threads))
        try:
            small.decode([seed_token], [0], [0], [False])
            state = len(small.save_state(0))
        finally:
            small.close()

        def timed(num_seqs: int, k: int) -> float:
            times = []
            for _ in range(repeats + 1):  # NOTE: the first of a shape sizes its buffers: untimed
                tokens = [seed_token] * (num_seqs * k)
                positions = [context + i for _ in range(num_seqs) for i in range(k)]
                seq_ids = [s for s in range(num_seqs) for _ in range(k)]
                started = time.perf_counter()
                ctx.decode(tokens, positions, seq_ids, [True] * len(tokens))
                times.append(time.perf_counter() - started)
                for s in range(num_seqs):  # back to the prompt, for the next repeat
                    ctx.load_state(s, saved[s])
            return statistics.median(times[1:])

        one = timed(1, 1)
        verify = {k: timed(1, k) / one for k in VERIFY_SIZES}
        many = {s: timed(s, 1) / one for s in SEQUENCE_COUNTS}
        return StepCosts(one, verify, many, (len(saved[0]) - state) // context, state)
    finally:
        ctx.close()


def as_table(name: str, costs: StepCosts) -> str:
    lines = [
        f"model: {name}",
        f"one-token step: {1000 * costs.one_token_seconds:.1f} ms "
        f"({1 / costs.one_token_seconds:.1f} tok/s)",
        f"state: {costs.kv_bytes_per_token / 1024:.1f} KiB a token of context, "
        f"{costs.state_bytes / 2**20:.2f} MiB that does not grow (recurrent layers)",
        "",
        f"{'batch':<34} {'cost':>8} {'tokens a step-cost':>20}",
    ]
    for k, ratio in costs.verify.items():
        lines.append(
            f"{f'verify, {k} tokens of one sequence':<34} {ratio:>7.2f}x {k / ratio:>19.2f}"
        )
    for s, ratio in costs.sequences.items():
        lines.append(f"{f'{s} sequences, one token each':<34} {ratio:>7.2f}x {s / ratio:>19.2f}")
    return "\n".join(lines)
