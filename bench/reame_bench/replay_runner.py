"""`reame bench --replay`'s runner: a trace sent to one server in one mode (one client, or a
few users at once each holding its own conversations; straight through, or with the server
restarted after request N/2), each request built from the reply its conversation got before,
and every request recorded; then every trace, mode and server in turn, one server at a time so
that each has the machine to itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reame_bench.replay_report import Mode, Record
from reame_bench.replay_servers import Launcher, Server
from reame_bench.replay_traces import (
    Call,
    Message,
    Reply,
    Request,
    Trace,
    lane_requests,
    next_messages,
    request_body,
)
from reame_bench.sse_reader import BenchTargetError
from reame_bench.structured_runner import StreamFold
from reame_bench.targets import HttpTarget, Timeline


class ReplyFold(StreamFold):
    """A stream's timeline and the reply to send back: StreamFold's, plus each tool call's id,
    which the tool's message names."""

    def __init__(self, timeline: Timeline) -> None:
        super().__init__(timeline)
        self.ids: dict[int, str] = {}

    def _add_call(self, delta: dict[str, Any]) -> bool:
        index = delta.get("index")
        key = index if isinstance(index, int) else len(self.calls)
        if delta.get("id"):
            self.ids.setdefault(key, str(delta["id"]))
        return super()._add_call(delta)

    def finish(self, now: float) -> tuple[Timeline, Reply]:  # type: ignore[override]
        answer = super().finish(now)
        calls = tuple(
            Call(self.ids.get(k, ""), self.calls[k].name, self.calls[k].arguments)
            for k in sorted(self.calls)
        )
        return answer.timeline, Reply(answer.timeline.text, calls)


def record_of(
    trace: str, server: str, mode: Mode, request: Request, user: int, t0: float,
    timeline: Timeline | None, reply: Reply, error: str,
) -> Record:  # fmt: skip
    restarted = mode.restart_after is not None and request.index > mode.restart_after
    if timeline is None:
        nan = float("nan")
        return Record(trace, server, mode.key, request.index, request.conversation, request.turn,
                      user, 0.0, nan, nan, None, 0, 0, 0, None, request.overlap, restarted,
                      error)  # fmt: skip
    span = timeline.last - timeline.first
    tokens = timeline.num_tokens
    decode = (tokens - 1) / span if tokens > 1 and span > 0 else None
    return Record(
        trace, server, mode.key, request.index, request.conversation, request.turn, user,
        timeline.submitted - t0, timeline.ttft, timeline.finished - timeline.submitted, decode,
        timeline.num_prompt_tokens, timeline.num_cached_tokens, tokens,
        timeline.num_accepted_drafts, request.overlap, restarted, "", reply.as_text(),
        len(reply.complete_calls()),
    )  # fmt: skip


@dataclass
class _Conversation:
    sent: list[Message] | None = None
    reply: Reply | None = None


async def replay(
    trace: Trace,
    server: Server,
    name: str,
    mode: Mode,
    max_tokens: int,
    log: Callable[[str], None],
    api_key: str | None = None,
) -> list[Record]:
    """One run. With a restart, every user finishes its requests up to `restart_after` and
    waits; the server restarts; then they go on where they were."""
    conversations = {r.conversation: _Conversation() for r in trace.requests}
    restart_after = mode.restart_after
    left_before = sum(1 for r in trace.requests if restart_after and r.index <= restart_after)
    restarted = asyncio.Event()
    if not left_before:
        restarted.set()
    target = [await HttpTarget.open(server.url, name, api_key)]
    records: list[Record] = []
    t0 = time.perf_counter()

    async def restart() -> None:
        await target[0].aclose()
        began = time.perf_counter()
        await asyncio.to_thread(server.restart)
        took = time.perf_counter() - began
        log(f"{trace.name}: {name}: restarted after request {restart_after} ({took:.1f} s)")
        target[0] = await HttpTarget.open(server.url, name, api_key)
        restarted.set()

    async def user(u: int, lane: Sequence[Request]) -> None:
        nonlocal left_before
        for request in lane:
            before = restart_after is not None and request.index <= restart_after
            if not before:
                await restarted.wait()
            if request.pause:
                await asyncio.sleep(request.pause)
            state = conversations[request.conversation]
            messages = next_messages(request, state.sent, state.reply)
            body = request_body(target[0].model, request, messages, max_tokens)
            timeline: Timeline | None = None
            reply, error = Reply(""), ""
            try:
                timeline, reply = await target[0].stream_body(body, ReplyFold)
            except BenchTargetError as exc:
                error = str(exc)
                log(f"{trace.name}: {name}: request {request.index} failed: {error[:300]}")
            state.sent, state.reply = messages, reply
            records.append(
                record_of(trace.name, name, mode, request, u, t0, timeline, reply, error)
            )
            if before:
                left_before -= 1
                if not left_before:
                    await restart()

    try:
        await asyncio.gather(
            *(user(u, lane) for u, lane in enumerate(lane_requests(trace, mode.users)))
        )
    finally:
        await target[0].aclose()
    return sorted(records, key=lambda r: r.index)


def replay_all(
    traces: Sequence[Trace],
    launchers: Sequence[Launcher],
    run_modes: Sequence[Mode],
    max_tokens: int,
    log: Callable[[str], None],
) -> tuple[list[Record], list[str]]:
    """Every trace in every mode on every server, each run on a server started for it; the
    records and notes on what could not be run."""
    records: list[Record] = []
    notes: list[str] = []
    for launcher in launchers:
        if not launcher.restartable and any(m.restart_after for m in run_modes):
            notes.append(
                f"{launcher.name} was not started by the bench: its restart runs are left out"
            )
        if not launcher.fresh:
            notes.append(
                f"{launcher.name} was not started by the bench: its runs follow each other on "
                "one server, which may have kept what earlier runs sent"
            )
    for trace in traces:
        for mode in run_modes:
            for launcher in launchers:
                if mode.restart_after and not launcher.restartable:
                    continue
                log(f"{trace.name}: {mode.label}: {launcher.name} ({len(trace.requests)} requests)")
                started = time.perf_counter()
                server = launcher.start()
                run: list[Record] = []
                try:
                    run = asyncio.run(
                        replay(
                            trace, server, launcher.name, mode, max_tokens, log, launcher.api_key
                        )
                    )
                finally:
                    failed = not run or any(r.error for r in run)
                    server.stop(keep_logs=failed)
                    if failed and server.logs:
                        log(f"{launcher.name}: its log is kept for the failures: {server.logs}")
                records += run
                took = time.perf_counter() - started
                log(f"{trace.name}: {mode.label}: {launcher.name}: {took:.0f} s")
    return records, notes
