"""Large buffers come back warm in `reame serve`'s process (host_memory.py): a 40 MB buffer
allocated in a thread, freed and allocated again faults its pages in once, not every time.
Each case runs in a process of its own (malloc's settings are the process's)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import json, resource, sys, threading
    from reame.host_memory import reuse_large_buffers
    applied = reuse_large_buffers(512 << 20) if sys.argv[1] == "tuned" else None
    SIZE = 40 << 20
    faults = []
    def run():
        kept = []
        for _ in range(6):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            buf = bytearray(SIZE)
            buf[::4096] = b"\\x01" * len(range(0, SIZE, 4096))  # touch every page
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
            kept.append(buf)
            if len(kept) > 2:  # a RAM tier that drops its oldest state
                kept.pop(0)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    print(json.dumps({"applied": applied, "faults": faults}))
    """
)
PAGES = (40 << 20) // 4096


def faults_of(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_large_buffer_freed_is_reused_without_faulting_its_pages_again() -> None:
    if sys.platform != "linux":
        pytest.skip("glibc's malloc settings")
    plain = faults_of("plain")
    assert all(f >= PAGES * 0.9 for f in plain["faults"])  # each one a fresh mmap
    tuned = faults_of("tuned")
    assert tuned["applied"] is True
    assert all(f < PAGES * 0.1 for f in tuned["faults"][3:])  # after the first three
