"""Time to first token of questions behind a system prompt the server already computed (the
prefix cache's warm case), streamed by the real `openai` client, one client.
Usage: python3 warm_ttft.py URL OUT.json [QUESTIONS]. Prints the median over questions 2 on."""

import json
import random
import statistics
import sys
import time

from openai import OpenAI

url, out = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 16
client = OpenAI(base_url=url + "/v1", api_key="none")
model = client.models.list().data[0].id
rng = random.Random(7)
words = [
    "the",
    "river",
    "carries",
    "silt",
    "from",
    "the",
    "mountains",
    "to",
    "the",
    "delta",
    "where",
    "farmers",
    "plant",
    "rice",
]
system = " ".join(rng.choice(words) for _ in range(600))
subjects = ["river", "silt", "delta", "farmers", "rice", "mountains", "plant", "carries"]
records = []
for i in range(n):
    question = f"In one line: what does the text say about the {subjects[i % 8]}? ({i})"
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    sent, first = time.perf_counter(), None
    stream = client.chat.completions.create(
        model=model, messages=messages, stream=True, max_tokens=16, temperature=0
    )
    for chunk in stream:
        delta = chunk.choices[0].delta if chunk.choices else None
        if first is None and delta is not None and delta.content:
            first = time.perf_counter()
    assert first is not None
    records.append({"question": i, "ttft": first - sent})
    time.sleep(0.5)
with open(out, "w") as f:
    json.dump(records, f, indent=1)
later = [r["ttft"] for r in records[1:]]
print(f"{out}: median first token {1000 * statistics.median(later):.1f} ms over {len(later)}")
