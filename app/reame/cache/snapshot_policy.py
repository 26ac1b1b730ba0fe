"""Where a computation is worth keeping, in one place: the prompt lengths at which a request's
state is snapshotted, whether an answer's final state is kept, and how much of a free
sequence's KV is worth going on from. Pure.

A snapshot costs about 20 KB a token of SmolLM2 in memory and on disk: one that saves a few
tokens of compute is not worth it.
"""

from __future__ import annotations

from dataclasses import dataclass

from reame.cache.keys import BLOCK_TOKENS

MIN_RESIDENT = 32  # tokens of a free sequence's KV worth going on from rather than emptying it
MIN_NEW_FOR_FINAL = BLOCK_TOKENS  # an answer's final state is kept if it adds this many


@dataclass(slots=True, frozen=True)
class SnapshotPolicy:
    min_tokens: int = 64  # no state shorter than this is kept
    max_snapshots: int = 4  # a prompt's snapshots at most
    stride: int = 512  # long prompts also get a snapshot every `stride` tokens

    def points(
        self,
        num_tokens: int,
        marks: list[int],
        base: int = 0,
        must: tuple[int, ...] = (),
        spacing: int = 0,
    ) -> tuple[int, ...]:
        """Where a prompt's state is worth keeping, best first: the end of its first message (a
        system prompt), the end of its last earlier turn, the whole prompt, each at least a
        block past `base` (the prefix the request restores); then every `stride` tokens from the
        longest down, each at least min_tokens past it. At most max_snapshots, a block apart.
        Then the `must` points (answers' starts, where a later request starts from a state a cold
        one must also cut), whatever their spacing from the others, but for one that is no mark
        and less than `spacing` past the point kept before it (or `base`)."""
        near, far = base + BLOCK_TOKENS, base + self.min_tokens
        inside = sorted({m for m in marks if max(near, self.min_tokens) <= m < num_tokens})
        ranked = [p for p in (*inside[:1], *inside[-1:], num_tokens) if p >= near]
        ranked += [p for p in range(self.stride, num_tokens, self.stride)[::-1] if p >= far]
        chosen: list[int] = []
        for p in ranked:
            spaced = all(abs(p - q) >= BLOCK_TOKENS for q in chosen)
            if p >= self.min_tokens and spaced and len(chosen) < self.max_snapshots:
                chosen.append(p)
        # NOTE: on memory that can be cut back, an answer's start close past the cut before
        # (a turn's new message between them) would make every turn a step more, and a turn
        # going on from the turn before drops such a cut (exact_reuse.cuts_past), so it would
        # compute its message otherwise than a cold request; the history is then computed
        # from the cut before (the new message again, in idle time)
        starts = {p for p in must if base < p < num_tokens} - set(marks)
        kept: list[int] = []
        for p in sorted({*chosen, *(m for m in must if base < m < num_tokens)}):
            if p not in starts or p - (kept[-1] if kept else base) >= spacing:
                kept.append(p)
        return tuple(kept)

    @staticmethod
    def keeps_final(num_tokens: int, num_restored: int) -> bool:
        """An answer's final state is kept for the next turn when it adds a block to what the
        request restored (a session keeps its state whatever it adds)."""
        return num_tokens >= num_restored + MIN_NEW_FOR_FINAL
