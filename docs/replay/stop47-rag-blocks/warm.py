"""Warm requests: one long system prompt, a new short question each; paired TTFT between two servers."""
import sys, time, json, httpx, statistics as st, random
urls = sys.argv[1:3]; n = int(sys.argv[3]); words = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
models = ["SmolLM2-135M-Instruct.Q4_1", "x"]
rng = random.Random(3)
vocab = "river stone light market winter garden paper engine silver morning harbor letter window forest".split()
system = " ".join(rng.choice(vocab) for _ in range(words))
def ttft(url, model, q):
    body = {"model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
            "max_tokens": 2, "temperature": 0, "stream": True, "answer_memory": False}
    t0 = time.perf_counter()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        for line in r.iter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                return time.perf_counter() - t0
res = {u: [] for u in urls if u != "-"}
for u in res: ttft(u, models[urls.index(u)], "Warm up.")
for i in range(n):
    q = f"What is item {i} about, in {rng.randint(2, 9)} words?"
    order = list(res) if i % 2 == 0 else list(res)[::-1]
    for u in order:
        res[u].append(ttft(u, models[urls.index(u)], q))
for u, v in res.items(): print(u, f"warm ttft median {1000*st.median(v):.1f} ms")
if len(res) == 2:
    a, b = res.values(); print(f"ratio A/B median of pairs {st.median(x/y for x,y in zip(a,b)):.3f}")
