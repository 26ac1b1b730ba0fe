"""Greedy completions of 10 prompts that share a 420-word start, each from a server that keeps
what it computed (the prompts in turn), against a cold one: COLD=none a server without a prefix
cache, COLD=fresh a server with an empty cache per prompt. Prints each prompt's cached tokens and
whether the texts differ. Usage: [SEED=3] [COLD=none|fresh] python3 warm_cold.py MODEL.gguf
(PYTHONPATH=TREE/app to run another tree's server)."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import numpy as np

model = sys.argv[1]
WORK = os.environ.get("WORK", "/tmp/warm_cold")
os.makedirs(WORK, exist_ok=True)
extra_env = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}


def start(port, cache, state):
    env = dict(
        os.environ,
        REAME_STATE_DIR=state,
        REAME_PREFIX_CACHE=str(cache).lower(),
        REAME_SPEC="off",
        REAME_ANSWER_MEMORY="false",
        **extra_env,
    )
    return subprocess.Popen(
        [
            "reame",
            "serve",
            model,
            "--port",
            str(port),
            "--threads",
            "2",
            "--parallel",
            "1",
            "--context-length",
            "2048",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(f"{WORK}/serve{port}.log", "w"),
    )


def post(port, prompt):
    body = json.dumps(
        {
            "model": os.path.basename(model).removesuffix(".gguf"),
            "prompt": prompt,
            "max_tokens": 24,
            "temperature": 0,
        }
    ).encode()
    for _ in range(600):
        try:
            r = urllib.request.urlopen(
                urllib.request.Request(
                    f"http://127.0.0.1:{port}/v1/completions",
                    body,
                    {"Content-Type": "application/json"},
                ),
                timeout=300,
            )
            d = json.loads(r.read())
            return d["choices"][0]["text"], d["usage"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(e.read()) from e
        except (ConnectionError, urllib.error.URLError):
            time.sleep(0.5)


words = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "river",
    "mountain",
    "table",
    "window",
    "orange",
    "seven",
    "market",
    "garden",
    "silver",
    "pencil",
    "cloud",
    "engine",
]
rng = np.random.default_rng(int(os.environ.get("SEED", "3")))
base = " ".join(rng.choice(words, 420))
prompts = [
    base + " " + " ".join(rng.choice(words, int(k))) + " The next word is"
    for k in rng.integers(3, 90, 10)
]
shutil.rmtree(f"{WORK}/warm", True)
shutil.rmtree(f"{WORK}/cold", True)
fresh = os.environ.get("COLD") == "fresh"  # cold: an empty cache per prompt, not no cache
warm = start(8101, True, f"{WORK}/warm")
cold = None if fresh else start(8102, False, f"{WORK}/cold")
try:
    diff = 0
    for i, p in enumerate(prompts):
        w, uw = post(8101, p)
        if fresh:
            shutil.rmtree(f"{WORK}/cold", True)
            cold = start(8102, True, f"{WORK}/cold")
        c, uc = post(8102, p)
        if fresh:
            cold.terminate()
            cold.wait()
        diff += w != c
        print(
            i,
            "same" if w == c else "DIFF",
            uw.get("prompt_tokens_details"),
            uw["prompt_tokens"],
            repr(w[:40]),
            repr(c[:40]) if w != c else "",
            flush=True,
        )
    print("differ:", diff, "of", len(prompts))
finally:
    warm.terminate()
    warm.wait()
    if cold:
        cold.terminate()
        cold.wait()
