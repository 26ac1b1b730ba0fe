"""Issue 34's thinking trace against one Reame server, then each later turn asked again of a new
server on an empty cache (prefix cache on: a cold request as this server cuts it), greedy:
are the answers and the first eight tokens' logprobs the same, bit for bit?

Usage: [N=12] [WORDS=600] [PORT=8321] [WORK=/tmp/think-cold] [TRACE=1] python3 think_cold.py
(PYTHONPATH=TREE/app for another tree; TRACE=1 logs each match and step, ../stop53-answer-starts
trace_serve.py, to WORK/*.log)."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

from reame_bench.replay_traces import thinking_trace

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "../../../tests/templates/chatml-think-open.jinja")
WORK = os.environ.get("WORK", "/tmp/think-cold")
PORT = int(os.environ.get("PORT", "8321"))


def start(port: int, state: str) -> subprocess.Popen:
    shutil.rmtree(state, True)
    env = dict(os.environ, REAME_STATE_DIR=state, REAME_SPEC="off", REAME_ANSWER_MEMORY="false")
    env |= {"REAME_REASONING_BUDGET": "4", "REAME_CHAT_TEMPLATE_FILE": os.path.abspath(TEMPLATE)}
    traced = [sys.executable, os.path.join(HERE, "trace_serve.py")]
    args = [*(traced if os.environ.get("TRACE") else ["reame"]), "serve", "--port", str(port)]
    args += ["--threads", "2", "--parallel", "4", "--context-length", "4096"]
    with open(state + ".log", "a") as log:
        return subprocess.Popen(args + ["--log-level", "warning"], env=env, stderr=log)


def ask(port: int, messages: list) -> tuple[tuple, int, int]:
    body = {"model": "smollm2-135m", "messages": messages, "max_tokens": 128, "temperature": 0}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json.dumps({**body, "logprobs": True}).encode(),
        {"Content-Type": "application/json"},
    )
    for _ in range(240):
        try:
            d = json.loads(urllib.request.urlopen(request, timeout=300).read())
            break
        except (ConnectionError, urllib.error.URLError):
            time.sleep(0.5)
    else:
        raise RuntimeError("no server")
    choice, usage = d["choices"][0], d["usage"]
    logprobs = [t["logprob"] for t in (choice.get("logprobs") or {}).get("content") or []][:8]
    message = choice["message"]
    got = (message.get("reasoning_content"), message["content"], logprobs)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return got, usage["prompt_tokens"], cached


os.makedirs(WORK, exist_ok=True)
trace = thinking_trace(int(os.environ.get("N", "12")), int(os.environ.get("WORDS", "600")), 0)
warm = start(PORT, f"{WORK}/warm")
histories: dict[int, list] = {}
later = []
try:
    for r in trace.requests:
        time.sleep(r.pause * 1.5)  # NOTE: room for the history computed ahead
        messages = histories.setdefault(r.conversation, [])
        messages.extend(r.new)
        got, n, cached = ask(PORT, messages)
        print("warm conversation", r.conversation, "turn", r.turn, "prompt", n, "cached", cached)
        if r.turn > 1:
            later.append((list(messages), got))
        messages.append({"role": "assistant", "content": got[1]})
finally:
    warm.terminate()
    warm.wait()
differ = 0
for messages, got in later:
    cold = start(PORT + 1, f"{WORK}/cold")
    try:
        expected, n, _ = ask(PORT + 1, messages)
    finally:
        cold.terminate()
        cold.wait()
    text = "same" if expected[:2] == got[:2] else "DIFF"
    logprobs = "same" if expected[2] == got[2] else f"DIFF {got[2][:3]} {expected[2][:3]}"
    differ += text != "same" or logprobs != "same"
    print("cold prompt", n, "text", text, "logprobs", logprobs, flush=True)
print("differ:", differ, "of", len(later))
