"""Median time of PrefixReuse.prefetch over a RAM cache of 60 RAG-shaped states (a 600-token
system prompt, then three of ten 300-token passages in changing order)."""

import logging
import random
import statistics
import time

import structlog

from reame.cache.prefix_cache import CacheConfig, PrefixCache
from reame.cache.prefix_reuse import PrefixReuse
from reame.saved_state import SavedState
from reame.sessions import SessionStore

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def computed(tokens):
    n = len(tokens)
    return SavedState(tuple(tokens), bytes(n), (n,), ((0, n),), n)


rng = random.Random(0)
system = list(range(1000, 1600))
passages = [list(range(10_000 * (i + 1), 10_000 * (i + 1) + 300)) for i in range(10)]


def prompt():
    return (
        system
        + [t for p in rng.sample(passages, 3) for t in p]
        + [rng.randrange(50_000, 60_000) for _ in range(20)]
    )


cache = PrefixCache(CacheConfig(None, ram_bytes=1 << 30, disk_bytes=0, min_tokens=64), "f" * 64)
reuse = PrefixReuse(cache, SessionStore(8, 1 << 20, 3600))
for _ in range(60):
    cache.offer(computed(prompt()))
asks = [prompt() for _ in range(400)]
times = []
for a in asks:
    t = time.perf_counter()
    reuse.prefetch(a, "", None)
    times.append(time.perf_counter() - t)
print(f"prefetch median {1e6 * statistics.median(times):.0f} us")
cache.close()
