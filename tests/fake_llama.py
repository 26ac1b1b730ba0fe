"""A stand-in for llama.cpp's context and model, for engine tests that need no model: the
"model" writes a token that is a pure function of the sequence so far, so any interleaving of
sequences, chunking of prompts or restoring of states must give the tokens `reference` gives.

The context checks what the engine asks of it as llama.cpp would refuse it: every token goes at
the next free position of its sequence, logits are read only where they were asked for.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from reame.llama.context import ContextShape, DecodeInterrupted

VOCAB = 64
EOS = 0


def next_token(tokens: Sequence[int]) -> int:
    """What the fake model writes after `tokens` (never the end, unless it ends by length)."""
    return (sum(tokens[-3:]) * 7 + len(tokens)) % (VOCAB - 1) + 1


def reference(prompt: Sequence[int], max_tokens: int) -> list[int]:
    out = list(prompt)
    for _ in range(max_tokens):
        out.append(next_token(out))
    return out[len(prompt) :]


class FakeModel:
    vocab_size = VOCAB
    bos_id = 1
    eos_id = EOS

    def is_end_of_generation(self, token: int) -> bool:
        return token == EOS

    def piece(self, token: int) -> bytes:
        return f"<{token}>".encode()

    def end_of_generation_ids(self) -> list[int]:
        return [EOS]


@dataclass
class FakeContext:
    shape: ContextShape
    step_seconds: float = 0.0  # a decode this slow leaves room to act in the middle of a request
    # False: as recurrent memory, a sequence cannot be cut back short of its end (only emptied),
    # but a checkpoint of it can be rolled back to
    can_cut: bool = True
    cuts_refused: int = 0
    kv: dict[int, list[int]] = field(default_factory=dict)
    batches: list[list[tuple[int, int, int]]] = field(default_factory=list)  # (seq, pos, token)
    interrupt: Callable[[], bool] | None = None
    interrupted: int = 0  # decodes stopped by `interrupt`
    _rows: dict[int, np.ndarray] = field(default_factory=dict)  # by index in the batch

    def interrupt_when(self, check: Callable[[], bool] | None) -> None:
        self.interrupt = check

    def decode(
        self,
        tokens: Sequence[int],
        positions: Sequence[int],
        seq_ids: Sequence[int],
        wants_logits: Sequence[bool],
    ) -> None:
        assert 0 < len(tokens) <= self.shape.batch_size, "a batch within the budget"
        ends = time.monotonic() + self.step_seconds
        while (left := ends - time.monotonic()) > 0:  # NOTE: asked as llama.cpp asks, often
            if self.interrupt is not None and self.interrupt():
                self.interrupted += 1
                raise DecodeInterrupted(2)
            time.sleep(min(left, 0.002))
        self.batches.append(list(zip(seq_ids, positions, tokens, strict=True)))
        self._rows = {}
        batch = zip(tokens, positions, seq_ids, wants_logits, strict=True)
        for index, (token, pos, seq, wants) in enumerate(batch):
            cells = self.kv.setdefault(seq, [])
            assert pos == len(cells), f"sequence {seq}: position {pos} after {len(cells)} cells"
            cells.append(token)
            if wants:
                row = np.full(VOCAB, -10.0, dtype=np.float32)
                row[next_token(cells)] = 10.0
                self._rows[index] = row

    def logits(self, batch_index: int) -> np.ndarray:
        """As llama_get_logits_ith: by the token's index in the last batch, which must have
        asked for them."""
        return self._rows[batch_index]

    def save_state(self, seq_id: int) -> bytearray:
        return bytearray(pickle.dumps(list(self.kv.get(seq_id, []))))

    def load_state(self, seq_id: int, data: bytes | bytearray) -> bool:
        self.kv[seq_id] = pickle.loads(bytes(data))
        return True

    def copy(self, source: int, targets: Sequence[int]) -> None:
        for target in targets:
            self.kv[target] = list(self.kv.get(source, []))

    def remove(self, seq_id: int, start: int = 0, end: int = -1) -> bool:
        cells = self.kv.setdefault(seq_id, [])
        if not self.can_cut and 0 < start < len(cells):
            self.cuts_refused += 1
            return False
        del cells[start:]
        return True

    def checkpoint(self, seq_id: int) -> bytearray:
        return bytearray(pickle.dumps(list(self.kv.get(seq_id, []))))

    def rollback(self, seq_id: int, checkpoint: bytearray, position: int) -> bool:
        cells = pickle.loads(bytes(checkpoint))
        if len(cells) > position:  # NOTE: a checkpoint is of what was computed before it
            return False
        self.kv[seq_id] = cells
        return True

    def clear(self, seq_id: int) -> None:
        self.kv[seq_id] = []

    def tokens_computed(self, token_filter: Sequence[int]) -> int:
        """How many times the tokens of `token_filter` went into a batch (prefill counting)."""
        wanted = set(token_filter)
        return sum(1 for batch in self.batches for _, _, t in batch if t in wanted)
