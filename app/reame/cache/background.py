"""The cache's background threads (the writer, the preload) run at the lowest priority: on a
2-core machine, compressing or decompressing tens of MB must not take a core from llama.cpp's
decode threads, whose every barrier waits for the slowest of them. On Linux a thread has a
nice value of its own."""

from __future__ import annotations

import contextlib
import os
import threading


def lower_this_thread() -> None:
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
