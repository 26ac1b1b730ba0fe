"""Which waiting request a free sequence goes to, when several keys have requests. Pure.

First come, first served let one key that sends many requests at once hold every running
sequence while another key's request waited behind them (measured: a flooding key made another
key's 16-token chats 4.2x slower). Here a free sequence goes to the waiting request of the key
with the fewest running sequences (the first to come among them), and no key runs more than
its equal share of the sequences while other keys have requests: a key alone may take them all.

Equal shares are not enough on a CPU: a step costs about as much per token whatever the batch
(2 cores: a quiet server answers 4 chats a second whether 2 or 4 run), so a key that kept the
engine busy alone is twice as slow beside another key that takes its half (measured: 2.03x).
So keys that ask for no more than their share go first: while one of them has requests, a key
that asks for more (it has more requests than it may run) runs at most half its share. Beside
it, a key within its share sees steps of at most 1.5 times its own tokens.

Sequences are not the whole cost (a flooding key's one sequence beside the other key's two
still left it 1.4x slower, its prompts computed too), so such a key also steps only every other
step while a key within its share computes: it goes on, at half the pace.

A key counts as having requests for ACTIVE_GRACE_SECONDS after its last one: a client that
sends its next request as the last one ends leaves a gap of milliseconds, and a flooding key
that took every sequence in that gap held them for seconds (measured: the other key's p99 went
from 1.0 s to 8.4 s).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

ACTIVE_GRACE_SECONDS = 2.0


def fair_share(num_sequences: int, active_owners: int) -> int:
    """How many sequences one key may run while `active_owners` keys have requests."""
    return max(1, -(-num_sequences // max(1, active_owners)))


def shares(
    waiting_owners: Sequence[str],
    running: Counter[str],
    num_sequences: int,
    recent_owners: Iterable[str] = (),
) -> dict[str, int]:
    """How many sequences each key with requests (or with requests a moment ago,
    `recent_owners`) may run now."""
    asked = running + Counter(waiting_owners)
    for owner in recent_owners:
        asked.setdefault(owner, 0)
    share = fair_share(num_sequences, len(asked))
    if len(asked) < 2 or all(n > share for n in asked.values()):
        return dict.fromkeys(asked, share)
    return {k: share if n <= share else max(1, share // 2) for k, n in asked.items()}


def yielding_owners(
    waiting_owners: Sequence[str],
    running_owners: Iterable[str],
    num_sequences: int,
    recent_owners: Iterable[str] = (),
) -> set[str]:
    """The keys that ask past their share beside a key within its own (run half of it)."""
    running = Counter(running_owners)
    may_run = shares(waiting_owners, running, num_sequences, recent_owners)
    share = max(may_run.values(), default=0)
    return {owner for owner, n in may_run.items() if n < share}


def next_admitted(
    waiting_owners: Sequence[str],
    running_owners: Iterable[str],
    num_sequences: int,
    recent_owners: Iterable[str] = (),
) -> int | None:
    """The index in the queue (`waiting_owners`: each waiting request's key, first come
    first) of the request to admit next; None when every waiting key runs its share."""
    running = Counter(running_owners)
    may_run = shares(waiting_owners, running, num_sequences, recent_owners)
    best: int | None = None
    for i, owner in enumerate(waiting_owners):
        if running[owner] >= may_run[owner]:
            continue
        if best is None or running[owner] < running[waiting_owners[best]]:
            best = i
    return best


class RecentOwners:
    """The keys that had requests within ACTIVE_GRACE_SECONDS."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}

    def saw(self, owners: Iterable[str], now: float) -> None:
        for owner in owners:
            self._seen[owner] = now
        for owner in [o for o, t in self._seen.items() if now - t > ACTIVE_GRACE_SECONDS]:
            del self._seen[owner]

    def __iter__(self):
        return iter(self._seen)
