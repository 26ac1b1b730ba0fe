"""Alternate streamed decode requests between two live servers; paired tok/s."""
import sys, time, json, httpx, statistics as st, random
A, B, words, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
vocab = "river stone light market winter garden paper engine silver morning harbor letter window forest".split()
def one(url, model, text):
    body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 128,
            "temperature": 0, "stream": True, "answer_memory": False, "ignore_eos": True, "stream_options": {"include_usage": True}}
    stamps = []; usage = None
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                d = json.loads(line[6:])
                if d.get("usage"): usage = d["usage"]
                if d.get("choices") and (d["choices"][0].get("delta") or {}).get("content"):
                    stamps.append(time.perf_counter())
    return (usage["completion_tokens"] - 1) / (stamps[-1] - stamps[0])
ra, rb = [], []
for i in range(pairs):
    rng = random.Random(100 + i)
    text = " ".join(rng.choice(vocab) for _ in range(words)) + f"\n\nWrite a long story number {i}."
    order = [(A, "SmolLM2-135M-Instruct.Q4_1", ra), (B, "x", rb)]
    if i % 2: order.reverse()
    for url, model, out in order:
        out.append(one(url, model, text))
ratios = [a / b for a, b in zip(ra, rb)]
print(f"words {words}: A {st.median(ra):.1f} tok/s, B {st.median(rb):.1f} tok/s, A/B median of pairs {st.median(ratios):.3f}")
