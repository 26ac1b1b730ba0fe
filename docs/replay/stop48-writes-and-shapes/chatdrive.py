"""The replay's chat trace, one client, streamed, no pauses but the trace's; prints medians."""
import json, sys, time, httpx, statistics as st
from reame_bench.replay_traces import build_trace, request_body, next_messages, Reply
url, name, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
trace = build_trace(name, N, 4, 400, 0)
MODEL = httpx.get(url + "/v1/models").json()["data"][0]["id"]
state = {}; ttfts = []
with httpx.Client(timeout=300) as c:
    for r in trace.requests:
        if r.pause: time.sleep(r.pause)
        sent, reply = state.get(r.conversation, (None, None))
        msgs = next_messages(r, sent, reply)
        t0 = time.perf_counter(); fst = None; text = ""
        with c.stream("POST", url + "/v1/chat/completions", json=request_body(MODEL, r, msgs, 64)) as resp:
            for line in resp.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]": continue
                d = json.loads(line[6:])
                for ch in d.get("choices") or ():
                    de = ch.get("delta") or {}
                    if fst is None and de.get("content"): fst = time.perf_counter()
                    text += de.get("content") or ""
        state[r.conversation] = (msgs, Reply(text)); ttfts.append((fst or time.perf_counter()) - t0)
print("median ttft", round(st.median(ttfts), 3))
