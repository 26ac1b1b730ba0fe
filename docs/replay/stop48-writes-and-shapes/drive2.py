"""Thinking trace requests [first, last] (1-based), one client, streamed; conversation state
kept in a JSON file between calls (so a server can be restarted in between)."""
import json, os, sys, time, httpx
from reame_bench.replay_traces import build_trace, request_body, next_messages, Reply
url, out, first, last, N, MT, statef = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
trace = build_trace(os.environ.get("TRACE", "thinking"), N, 4, 400, 0)
MODEL = httpx.get(url + "/v1/models").json()["data"][0]["id"]
state = {int(k): v for k, v in json.load(open(statef)).items()} if os.path.exists(statef) else {}
recs = json.load(open(out)) if os.path.exists(out) else []
# NOTE: FRESH_CONNECTIONS=1 for llama-server, which closes a kept-alive connection between calls
fresh = httpx.Limits(max_keepalive_connections=0) if os.environ.get("FRESH_CONNECTIONS") else None
with httpx.Client(timeout=300, **({"limits": fresh} if fresh else {})) as c:
    for r in trace.requests:
        if not first <= r.index <= last: continue
        if r.pause: time.sleep(float(os.environ.get("PAUSE", r.pause)))
        sent, reply = state.get(r.conversation, (None, None))
        msgs = next_messages(r, sent, Reply(reply) if reply is not None else None)
        body = request_body(MODEL, r, msgs, MT)
        t0 = time.perf_counter(); fst = None; text = ""; usage = None
        with c.stream("POST", url + "/v1/chat/completions", json=body) as resp:
            for line in resp.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]": continue
                d = json.loads(line[6:])
                for ch in d.get("choices") or ():
                    de = ch.get("delta") or {}
                    if fst is None and (de.get("content") or de.get("reasoning_content")): fst = time.perf_counter()
                    text += de.get("content") or ""
                if d.get("usage"): usage = d["usage"]
        state[r.conversation] = (msgs, text)
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        recs.append(dict(i=r.index, turn=r.turn, t0=t0, first=fst, ttft=fst - t0, prompt=usage["prompt_tokens"], cached=cached))
        print(r.index, r.turn, f"{1000*(fst-t0):.0f}ms", usage["prompt_tokens"] - cached, flush=True)
json.dump(recs, open(out, "w")); json.dump(state, open(statef, "w"))
