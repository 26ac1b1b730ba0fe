"""The replay's RAG trace sent to two servers in turn, request by request (which goes first
alternates), with a pause after each so that one server's idle-time work (the prefix cache's
writes wait for a second of quiet) is done before the other is asked. Prints the median of the
per-request time-to-first-token ratios (first URL over second) by block, and overall.
Usage: PYTHONPATH=BENCH python3 rag_pair.py URL_A URL_B N OUT.json"""

import json
import statistics
import sys
import time
from collections import defaultdict

import httpx

from reame_bench.replay_traces import build_trace, request_body

PAUSE_SECONDS = 2.0


def ask(client: httpx.Client, url: str, body: dict) -> tuple[float, int]:
    """Time to the first content token, and prompt tokens computed."""
    began, first, usage = time.perf_counter(), None, None
    with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            data = json.loads(line[6:])
            delta = (data.get("choices") or [{}])[0].get("delta") or {}
            if first is None and delta.get("content"):
                first = time.perf_counter() - began
            usage = data.get("usage") or usage
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return first, usage["prompt_tokens"] - cached


def main() -> None:
    url_a, url_b, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    trace = build_trace("rag", n, 4, 400, 0)
    rows = []
    with httpx.Client(timeout=300) as client:
        models = {u: client.get(u + "/v1/models").json()["data"][0]["id"] for u in (url_a, url_b)}
        for r in trace.requests:
            order = (url_a, url_b) if r.index % 2 else (url_b, url_a)
            got = {}
            for url in order:
                got[url] = ask(client, url, request_body(models[url], r, list(r.new), 32))
                time.sleep(PAUSE_SECONDS)
            rows.append(dict(i=r.index, overlap=r.overlap, a=got[url_a], b=got[url_b]))
    with open(out, "w") as f:
        json.dump(rows, f)
    blocks = defaultdict(list)
    for row in rows:
        blocks[row["overlap"]].append(row["a"][0] / row["b"][0])
    for overlap in sorted(blocks):
        ratio = statistics.median(blocks[overlap])
        print(f"{overlap:.0%} shared: {ratio:.2f}x ({len(blocks[overlap])})")
    ratios = [row["a"][0] / row["b"][0] for row in rows]
    computed = [sum(row[k][1] for row in rows) for k in ("a", "b")]
    print(
        f"all: {statistics.median(ratios):.2f}x median of {len(rows)} ratios; computed {computed}"
    )


main()
