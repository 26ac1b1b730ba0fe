"""The cost of a budget's forced close, from a client: the gap between the thought's last
delta and the answer's first, against the median gap between deltas of the answer, over
requests with a budget that closes the thought by force. Stream interval 0, drafts off."""
import statistics as st
import sys
import time

from openai import OpenAI

url, budget, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = OpenAI(base_url=f"{url}/v1", api_key="x")
questions = ["What is the capital of France?", "Name three rivers of Europe.",
             "Why is the sky blue?", "How do plants make food?", "What is 12 times 7?"]
close_gaps, token_gaps = [], []
for i in range(runs):
    stream = client.chat.completions.create(
        model="smollm2-135m", temperature=0, max_tokens=64, stream=True,
        messages=[{"role": "user", "content": questions[i % len(questions)] + f" ({i})"}],
        extra_body={"reasoning_budget": budget, "speculation": "off"},
    )
    last_thought = first_answer = None
    answer_times = []
    for chunk in stream:
        now = time.perf_counter()
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if (delta.model_extra or {}).get("reasoning_content"):
            last_thought = now
        if delta.content:
            if first_answer is None:
                first_answer = now
            answer_times.append(now)
    if last_thought and first_answer:
        close_gaps.append(first_answer - last_thought)
        token_gaps += [b - a for a, b in zip(answer_times, answer_times[1:])]
print(f"forced close: median {1000 * st.median(close_gaps):.1f} ms from the thought's last "
      f"delta to the answer's first ({len(close_gaps)} requests); answer deltas median "
      f"{1000 * st.median(token_gaps):.1f} ms apart; ratio "
      f"{st.median(close_gaps) / st.median(token_gaps):.2f}")
