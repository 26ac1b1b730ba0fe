"""What a 60 MB buffer costs in new memory, and after a warm (allocate, touch, free 1.5x): heap_probe.py plain|warm."""
import time, sys
from reame.host_memory import reuse_large_buffers
print("mallopt", reuse_large_buffers(512 << 20))
S = 60 << 20
kept = []
def alloc():
    t = time.perf_counter(); b = bytearray(S); kept.append(b); return 1000 * (time.perf_counter() - t)
mode = sys.argv[1]
for i in range(8):
    if mode == "warm":
        t = time.perf_counter(); w = bytearray(S + (S >> 1)); del w; warm = 1000 * (time.perf_counter() - t)
    else:
        warm = 0
    print(f"{i}: warm {warm:.0f} ms, alloc {alloc():.0f} ms", flush=True)
