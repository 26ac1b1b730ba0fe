"""`reame serve` with each request's path timed to stderr (CLOCK_MONOTONIC seconds, as a
client's time.perf_counter): the call's start and preparation, submit, the reuse match, each step
(positions and lengths), the loop inbox's wake-ups and deliveries, each SSE frame, and the state
reads and restores. Usage: python3 trace_path.py serve [flags]."""

import functools
import sys
import time

import reame.api.calls as calls
import reame.engine.engine as engine
import reame.engine.reuse_index as reuse_index
import reame.engine.runner as runner
import reame.llama.context as llama_context
import reame.loop_inbox as li
from reame.cli.main import main


def mark(what):
    print(f"{time.perf_counter():.4f} {what}", file=sys.stderr, flush=True)


def wrap(cls, name, label, show=None):
    f = getattr(cls, name)
    if hasattr(f, "__code__") and f.__code__.co_flags & 0x80:  # coroutine

        @functools.wraps(f)
        async def g(*a, **k):
            mark(label + " <")
            r = await f(*a, **k)
            mark(label + " >")
            return r
    else:

        @functools.wraps(f)
        def g(*a, **k):
            mark(label + " <")
            r = f(*a, **k)
            mark(label + (" > " + show(a, r) if show else " >"))
            return r

    setattr(cls, name, g)


wrap(calls.Call, "start", "start")
wrap(calls.Call, "_prepare", "prepare")
wrap(engine.Engine, "submit_all", "submit")
wrap(
    reuse_index.ReuseIndex,
    "match",
    "match",
    lambda a, m: f"{m.tier if m else None} {m.length if m else 0} n {a[1].num_prompt}",
)
wrap(runner.Runner, "run", "run", lambda a, o: str([(p.start, len(p.tokens)) for p in a[1].parts]))
_frames = calls.Call.frames


async def frames(self):
    async for f in _frames(self):
        k = f.find("delta")
        mark("frame " + f[k : k + 100].replace("\n", " "))
        yield f


calls.Call.frames = frames

_wake = li.LoopInbox.wake


def wake(self):
    if self._items and not self._is_scheduled:
        mark(f"wake < urgent {self._is_urgent} items {len(self._items)}")
        _wake(self)
        mark(f"wake > scheduled {self._is_scheduled}")
    else:
        _wake(self)


li.LoopInbox.wake = wake
_deliver = li.LoopInbox._deliver


def deliver(self):
    mark(f"deliver {len(self._items)} " + " | ".join(repr(it[1].event)[:140] for it in self._items))
    _deliver(self)


li.LoopInbox._deliver = deliver

for _name in ("load_state", "save_state", "copy", "remove"):
    wrap(llama_context.Context, _name, _name)
sys.exit(main(sys.argv[1:]))
