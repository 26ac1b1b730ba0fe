"""Large buffers reused warm, where the C library is glibc.

A KV state read (llama_state_seq_get_data) writes 30-40 MB for a 1.5k-token SmolLM2 sequence
into a new buffer. glibc serves a request above its mmap threshold (32 MB at most, by its
sliding rule) with a fresh mmap, and a thread's arena cannot hold one above 64 MB, so each read
paid ~10k page faults: 22-27 ms a 32 MB read, against 4.4-5.5 ms into memory the process had
freed (measured here). One arena, no mmap below 1 GB and up to the RAM tier's budget of free
memory kept at the heap's top let a read land in the memory a dropped state left. The cost: the
process gives that much freed memory back to the system later, not at once."""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h
MMAP_ABOVE = 1 << 30


def reuse_large_buffers(keep_free: int) -> bool:
    """Call before the threads that allocate start; False where it does not apply (not glibc,
    or glibc refused a setting), and nothing changes then but what it accepted."""
    libc = ctypes.CDLL(None)
    # NOTE: musl has a mallopt that does nothing; only glibc names its version so
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    keep = max(128 << 10, min(keep_free, (1 << 31) - 1))
    settings = ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, MMAP_ABOVE), (M_TRIM_THRESHOLD, keep))
    return all(mallopt(param, value) == 1 for param, value in settings)
