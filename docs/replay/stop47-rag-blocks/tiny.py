import json, sys, time, httpx, statistics as st
url, model = sys.argv[1], sys.argv[2]
out = []
with httpx.Client(timeout=60, limits=httpx.Limits(max_keepalive_connections=0)) as c:
    for i in range(30):
        body = {"model": model, "messages": [{"role": "user", "content": f"Say {i}."}], "max_tokens": 2,
                "temperature": 0, "stream": True, "answer_memory": False}
        t0 = time.perf_counter(); ttft = None
        with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: {") and ttft is None and '"content":"' in line and '"content":""' not in line:
                    ttft = time.perf_counter() - t0
        out.append(ttft)
print(f"ttft median {1000*st.median(out[5:]):.1f} ms  min {1000*min(out[5:]):.1f}")
