"""How many bytes a KV state of n tokens of this model can take, so that a shared entry claiming
more is refused before anything is read in full, decompressed or allocated.

llama.cpp serializes a sequence as a fixed part (headers, and the recurrent state of a hybrid or
recurrent model, which does not grow) and a part per cell, so n tokens take fixed + n x per_token
bytes. Both are measured once at start, on the serving context before the engine runs on it: a
sequence's state after one token and after two (the model's own layers, KV type and layout,
where a formula over its metadata would miss a recurrent state or a sliding window).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reame.llama.context import Context

MARGIN = 64 << 10  # a snapshot's JSON header; and room for what llama.cpp may add to a state


@dataclass(slots=True, frozen=True)
class StateBound:
    per_token: int
    fixed: int

    def state_bytes(self, num_tokens: int) -> int:
        return self.fixed + num_tokens * self.per_token + MARGIN

    def blob_bytes(self, num_tokens: int) -> int:
        """A snapshot of such a state (snapshot_format): header, token ids, checksum and a zstd
        frame, which holds at most the state and zstd's block overhead (under 1/128)."""
        state = self.state_bytes(num_tokens)
        return MARGIN + 4 * num_tokens + state + state // 128


def measure(context: Context, seq_id: int = 0) -> StateBound:
    try:
        context.decode([0], [0], [seq_id], [False])
        one = len(context.save_state(seq_id))
        context.decode([0], [1], [seq_id], [False])
        two = len(context.save_state(seq_id))
    finally:
        context.clear(seq_id)
    return StateBound(per_token=two - one, fixed=max(one - (two - one), 0))
