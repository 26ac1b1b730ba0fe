"""The answer memory's hit rate on `reame bench --replay`'s traces: each trace sent to one Reame
server twice, as its users send it (the whole history every turn, each next turn built from the
answer the server gave), the second time as a retried batch job sends it again; the memory's
lookups (/metrics) counted per pass. Usage: python3 hit_rate.py URL USERS TRACE[,TRACE...] N"""

from __future__ import annotations

import sys
import threading

import httpx

from reame_bench.replay_traces import (
    Call,
    Reply,
    build_trace,
    lane_requests,
    next_messages,
    request_body,
)
from reame_bench.serve_process import read_metrics

MAX_TOKENS = 32  # as `reame bench --replay` asks


def reply_of(body: dict) -> Reply:
    message = body["choices"][0]["message"]
    calls = tuple(
        Call(c.get("id", ""), c["function"]["name"], c["function"]["arguments"])
        for c in message.get("tool_calls") or []
    )
    return Reply(message.get("content") or "", calls)


def send_lane(url: str, model: str, lane: list, errors: list) -> None:
    sent: dict[int, tuple[list, Reply]] = {}
    with httpx.Client(timeout=600) as client:
        for request in lane:
            before = sent.get(request.conversation)
            messages = next_messages(request, *(before or (None, None)))
            body = {**request_body(model, request, messages, MAX_TOKENS), "stream": False}
            body.pop("stream_options")
            r = client.post(f"{url}/v1/chat/completions", json=body)
            if r.status_code != 200:
                errors.append(r.text)
                continue
            sent[request.conversation] = (messages, reply_of(r.json()))


def lookups(url: str) -> dict[str, float]:
    m = read_metrics(url)
    return {k: m.get(f'reame_answer_memory_lookups_total{{result="{k}"}}', 0.0)
            for k in ("hit", "hit_shared", "miss")}  # fmt: skip


def main() -> None:
    url, users, names, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
    print("| trace | users | pass | requests | hits | misses | hit rate |")
    print("|---|---|---|---|---|---|---|")
    for name in names.split(","):
        trace = build_trace(name, count, 4, 400, seed=7)
        for run in (1, 2):
            before, errors = lookups(url), []
            lanes = lane_requests(trace, users)
            threads = [threading.Thread(target=send_lane, args=(url, model, lane, errors))
                       for lane in lanes]  # fmt: skip
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            after = lookups(url)
            hits = after["hit"] + after["hit_shared"] - before["hit"] - before["hit_shared"]
            misses = after["miss"] - before["miss"]
            rate = hits / max(1, hits + misses)
            print(f"| {name} | {users} | {run} | {len(trace.requests)} | {hits:.0f} | "
                  f"{misses:.0f} | {rate:.0%} |" + (f" errors: {len(errors)}" if errors else ""))  # fmt: skip


if __name__ == "__main__":
    main()
