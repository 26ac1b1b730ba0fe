"""Whether the old wait (blobs in the tier, counted cluster-wide) is met while replica one has
not yet put its own new snapshots: replica two answers another long prompt just before, so its
writes land during replica one's request."""
import sys, time, threading
sys.path.insert(0, "tests")
from test_cluster import replica, ask, SYSTEM
from reame_bench.workloads import filler_text
from redis_server import RedisServer

store = RedisServer()
one, two = replica(store), replica(store)
try:
    results = []
    for trial in range(3):
        other = [{"role": "system", "content": f"Trial {trial}. " + filler_text(seed=900 + trial, num_words=1200)},
                 {"role": "user", "content": "Why?"}]
        mine = [{"role": "system", "content": f"Run {trial}. " + SYSTEM}, {"role": "user", "content": "Why?"}]
        ask(two.url, other)  # two's states go to the tier once it is idle
        blobs0 = len(store.client().keys("reame:kv:*:b:*"))
        snaps = lambda: (one.metric("reame_prefix_cache_snapshots_total") - one.metric("reame_prefix_cache_writes_covered_total")
                         - one.metric("reame_prefix_cache_write_drops_total"))
        w0, s0 = one.metric("reame_prefix_cache_writes_total", 'tier="shared"'), snaps()
        ask(one.url, mine)
        old_met = new_met = None
        start = time.monotonic()
        while time.monotonic() - start < 30 and new_met is None:
            t = time.monotonic() - start
            blobs = len(store.client().keys("reame:kv:*:b:*")) - blobs0
            own = one.metric("reame_prefix_cache_writes_total", 'tier="shared"') - w0
            new = snaps() - s0
            if old_met is None and blobs >= new > 0:
                old_met = (round(t, 2), blobs, own, new)
            if own >= new > 0:
                new_met = (round(t, 2), blobs, own, new)
            time.sleep(0.05)
        print(f"trial {trial}: old wait met at {old_met} new at {new_met}  (t, blobs, own puts, new snapshots)", flush=True)
finally:
    one.stop(); two.stop(); store.stop()
