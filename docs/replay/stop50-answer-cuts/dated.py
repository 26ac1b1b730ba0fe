"""Conversations whose system prompts differ at their end (the day, as many apps put it there),
behind a thinking template: the time to each later turn's first token, and the history tokens
computed ahead in idle time. Usage: dated.py URL [CONVERSATIONS] (a `reame serve` with
--chat-template-file chatml-think-open.jinja and REAME_REASONING_BUDGET=4; dated.sh runs one)."""

import json
import statistics
import sys
import time

import httpx

from reame_bench.workloads import filler_text

URL = sys.argv[1]
CONVERSATIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
SYSTEM = "You are a helpful assistant. " + filler_text(seed=3, num_words=400)
QUESTIONS = ["What is a good name for a cat?", "Why is that a good name?", "Give me another one."]
client = httpx.Client(timeout=300)
MODEL = client.get(f"{URL}/v1/models").json()["data"][0]["id"]


def metric(name: str) -> float:
    for line in client.get(f"{URL}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def turn(messages: list[dict]) -> tuple[float, str]:
    body = {"model": MODEL, "messages": messages, "stream": True, "max_tokens": 64,
            "temperature": 0}  # fmt: skip
    sent, first, text = time.perf_counter(), None, ""
    with client.stream("POST", f"{URL}/v1/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if not line.startswith("data: ") or line[6:] == "[DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices", []):
                delta = choice.get("delta", {})
                if first is None and (delta.get("content") or delta.get("reasoning_content")):
                    first = time.perf_counter()
                text += delta.get("content") or ""
    return (first or time.perf_counter()) - sent, text


later, history = [], []
start = metric("reame_history_ahead_tokens_total")
for k in range(CONVERSATIONS):
    messages = [{"role": "system", "content": f"{SYSTEM} Today is {DAYS[k % 7]}."}]
    for n, question in enumerate(QUESTIONS):
        messages.append({"role": "user", "content": question})
        before = metric("reame_history_ahead_tokens_total")
        ttft, answer = turn(messages)
        messages.append({"role": "assistant", "content": answer})
        time.sleep(1.0)  # a user's pause, in which the history is computed ahead
        history.append(metric("reame_history_ahead_tokens_total") - before)
        if n:
            later.append(ttft)
        print(
            f"conversation {k} turn {n}: first token {ttft:.3f} s, history then {history[-1]:.0f}"
        )
time.sleep(3)
total = metric("reame_history_ahead_tokens_total") - start
print(
    f"later turns: median {statistics.median(later):.3f} s, max {max(later):.3f} s; "
    f"history tokens computed ahead: {total:.0f}"
)
