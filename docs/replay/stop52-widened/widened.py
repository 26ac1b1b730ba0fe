"""Chats behind one system prompt, each answered by a server that keeps what it computed and by
a cold one (a new server on an empty cache: it cuts its chunks where the warm one's cold
requests do, which a server without a prefix cache does not); prints each answer's cached tokens
and whether the texts differ.

The turns are made so that a question 40-63 tokens long is computed as the tiled 64 before its
end (exact_reuse.widened_start), back over the system prompt's last rows, and the next question
(which shares only its first words) goes on from the system prompt's end: before stop 52 those
rows were taken as the system prompt's own chunk computed them, as a cold request's does.
Usage: [SEEDS=1-8] [TRACE=1] [PORT=8111] python3 widened.py MODEL.gguf (PYTHONPATH=TREE/app
for another tree)."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import numpy as np

model = sys.argv[1]
WORK = os.environ.get("WORK", "/tmp/widened")
TEMPLATE = os.path.join(
    os.path.dirname(__file__), "../../../tests/templates/chatml-think-free.jinja"
)
WORDS = ["alpha", "beta", "gamma", "delta", "river", "mountain", "table", "window"]
WORDS += ["orange", "seven", "market", "garden", "silver", "pencil", "cloud", "engine"]


def start(port: int, cache: bool, state: str) -> subprocess.Popen:
    env = dict(
        os.environ,
        REAME_STATE_DIR=state,
        REAME_PREFIX_CACHE=str(cache).lower(),
        REAME_SPEC="off",
        REAME_ANSWER_MEMORY="false",
        REAME_CHAT_TEMPLATE_FILE=os.path.abspath(TEMPLATE),
    )
    # NOTE: TRACE=1: the warm server logs each reuse decision (stop51's trace_reuse.py)
    trace = os.path.join(os.path.dirname(__file__), "../stop51-exact-rows/trace_reuse.py")
    reame = [sys.executable, trace] if cache and os.environ.get("TRACE") else ["reame"]
    args = [*reame, "serve", model, "--port", str(port), "--threads", "2", "--parallel", "1"]
    args += ["--context-length", "2048", "--log-level", "warning"]
    with open(f"{WORK}/serve{port}.log", "w") as log:
        return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log)


def ask(port: int, system: str, user: str) -> tuple[str, int, int]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    name = os.path.basename(model).removesuffix(".gguf")
    body = {"model": name, "messages": messages, "max_tokens": 24, "temperature": 0}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    for _ in range(600):
        try:
            d = json.loads(urllib.request.urlopen(request, timeout=300).read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(e.read()) from e
        except (ConnectionError, urllib.error.URLError):
            time.sleep(0.5)
            continue
        usage = d["usage"]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return d["choices"][0]["message"]["content"], usage["prompt_tokens"], cached
    raise RuntimeError("no server")


first, last = map(int, os.environ.get("SEEDS", "1-8").split("-"))
os.makedirs(WORK, exist_ok=True)
shutil.rmtree(f"{WORK}/warm", True)
shutil.rmtree(f"{WORK}/cold", True)
PORT = int(os.environ.get("PORT", "8111"))
warm = start(PORT, True, f"{WORK}/warm")


def ask_cold(system: str, user: str) -> str:
    shutil.rmtree(f"{WORK}/cold", True)
    cold = start(PORT + 1, True, f"{WORK}/cold")
    try:
        return ask(PORT + 1, system, user)[0]
    finally:
        cold.terminate()
        cold.wait()


try:
    diff = total = 0
    for seed in range(first, last + 1):
        rng = np.random.default_rng(seed)
        system = "Answer in words. " + " ".join(rng.choice(WORDS, int(rng.integers(200, 320))))
        question = list(rng.choice(WORDS, int(rng.integers(30, 44))))
        users = [
            "Hello.",
            " ".join(question),  # widened back over the system prompt's end
            " ".join(question[:3] + list(rng.choice(WORDS, 12))),  # shares its first words
            " ".join(list(rng.choice(WORDS, 20))),
        ]
        for k, user in enumerate(users):
            w, n, cached = ask(PORT, system, user)
            if k < 2:  # NOTE: the first two only set the scene (a new cold server is slow)
                print(seed, "-", n, cached, repr(w[:40]), flush=True)
                continue
            c = ask_cold(system, user)
            diff += w != c
            total += 1
            same = "same" if w == c else "DIFF"
            print(seed, same, n, cached, repr(w[:40]), repr(c[:40]) if w != c else "", flush=True)
    print("differ:", diff, "of", total)
finally:
    warm.terminate()
    warm.wait()
