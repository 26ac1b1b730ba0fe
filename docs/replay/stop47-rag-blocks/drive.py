"""Send the replay's rag (or retrieval) trace, one client, streamed; print per-request ttft and tokens."""
import json, sys, time, httpx, statistics as st
from reame_bench.replay_traces import build_trace, request_body, next_messages
url, trace_name, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
words = 400 if trace_name == "rag" else 600
trace = build_trace(trace_name, n, 4, words, 0)
recs = []
with httpx.Client(timeout=300, limits=httpx.Limits(max_keepalive_connections=0)) as c:
    for r in trace.requests:
        body = request_body(sys.argv[5] if len(sys.argv) > 5 else "SmolLM2-135M-Instruct.Q4_1", r, list(r.new), 32)
        t0 = time.perf_counter(); ttft = None; usage = None
        with c.stream("POST", url + "/v1/chat/completions", json=body) as resp:
            for line in resp.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                d = json.loads(line[6:])
                if d.get("choices") and ttft is None and (d["choices"][0].get("delta") or {}).get("content"):
                    ttft = time.perf_counter() - t0
                if d.get("usage"):
                    usage = d["usage"]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        recs.append(dict(i=r.index, overlap=r.overlap, ttft=ttft, prompt=usage["prompt_tokens"], cached=cached))
json.dump(recs, open(out, "w"))
from collections import defaultdict
g = defaultdict(list)
for x in recs: g[x["overlap"]].append(x)
for k in sorted(g):
    v = g[k]
    print(f"overlap {k}: ttft median {st.median(x['ttft'] for x in v):.3f} computed median {st.median(x['prompt']-x['cached'] for x in v)}")
print(f"all: ttft median {st.median(x['ttft'] for x in recs):.3f} mean {st.mean(x['ttft'] for x in recs):.3f} computed {sum(x['prompt']-x['cached'] for x in recs)}")
