"""The stages of part (a) projected to a bigger model, from what was measured on the small one:
a stored prefix state grows with the KV bytes a token takes, so its bytes, fetch, decode and
restore scale by that ratio (each measured as a rate on this machine); the shared tier's listing
is one round trip whatever the size; a cold prompt is computed at the bigger model's prefill
rate, and what a hit leaves to compute costs the bigger model's warm time to first token, both
measured by the caller (`reame bench --prefix --synthetic ...`). A projection, not a
measurement: it assumes the bigger model's KV compresses as the small one's does."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Measured:
    """One tier's median stages on the small model."""

    ttft: float
    prompt_tokens: int
    cached_tokens: int
    bytes_moved: float
    lookup: float
    fetch: float
    decode: float
    restore: float


@dataclass(frozen=True, slots=True)
class Projected:
    ttft: float
    bytes_moved: float
    lookup: float
    fetch: float
    decode: float
    restore: float
    computed: float  # the uncached tokens at the bigger model's prefill rate
    fetch_over_link: float | None  # the fetch over a network link instead of loopback


def project(
    m: Measured,
    kv_ratio: float,
    prefill_tokens_per_s: float,
    link_bytes_per_s: float | None = None,
    from_network: bool = False,
    warm_s: float | None = None,
) -> Projected:
    """`kv_ratio`: the bigger model's KV bytes per token over the small one's;
    `from_network`: this tier's bytes come over the link (the shared tier); `warm_s`: the
    bigger model's measured time to first token with the prefix already in its slot, taken as
    what a hit leaves to compute (a short tail runs well below the long prompt's rate)."""
    uncached = m.prompt_tokens - m.cached_tokens
    computed = warm_s if warm_s is not None and m.cached_tokens else uncached / prefill_tokens_per_s
    moved = m.bytes_moved * kv_ratio
    fetch = m.fetch * kv_ratio
    over_link = moved / link_bytes_per_s if from_network and link_bytes_per_s and moved else None
    decode, restore = m.decode * kv_ratio, m.restore * kv_ratio
    loaded = m.lookup + (over_link if over_link is not None else fetch) + decode + restore
    return Projected(loaded + computed, moved, m.lookup, fetch, decode, restore, computed,
                     over_link)  # fmt: skip
