"""On hybrid memory: first turns that go on from the system prompt's stored state against the
same prompts sent cold, each to a runtime of its own with an empty cache (the cache on, as
shipped). Greedy token ids compared: a random-weight model writes tokens of no text.
Usage, from the repository's root: PYTHONPATH=app:bench:tests python3 THIS [SHAPE]
(default qwen3.5-tiny; qwen3.5-2b takes about 7 minutes on 2 cores)."""

import asyncio
import sys
from pathlib import Path

from conftest import small_settings
from reame.api.calls import Call
from reame.api.schemas import ChatRequest
from reame.api.served import Served
from reame.runtime import Runtime
from reame_bench.synthetic import build_synthetic
from state_dirs import new_state_dir

shape = sys.argv[1] if len(sys.argv) > 1 else "qwen3.5-tiny"
TEMPLATE = Path("tests/templates/chatml-think-open.jinja")
SYSTEM = {"role": "system", "content": "You answer questions about geography and history. " * 12}
QS = [
    "What is the capital of Spain?",
    "And of Portugal, please?",
    "Name a river in Greece.",
    "Which sea borders Italy?",
    "How tall is Mont Blanc?",
    "Where is Timbuktu?",
    "What is the largest lake in Africa?",
]


def answer(runtime, messages):
    served = Served(runtime.service, "m", frozenset({"m"}), 8)
    body = ChatRequest(
        model="m",
        messages=messages,
        temperature=0,
        max_tokens=24,
        logprobs=True,
        reasoning_budget=8,
        speculation="off",
    )

    async def call():
        c = Call(served, body, None)
        await c.start()
        r = await c.response()
        await asyncio.sleep(0.5)
        return [e.token for e in c.choices[0].logprobs], r["usage"]

    return asyncio.run(call())


model = build_synthetic(shape, new_state_dir(), num_threads=2)
kw = dict(chat_template_file=TEMPLATE, context_length=2048, parallel=4)
warm_out = []
with Runtime(small_settings(model, state_dir=new_state_dir(), **kw)) as warm:
    for q in QS:
        toks, usage = answer(warm, [SYSTEM, {"role": "user", "content": q}])
        warm_out.append(
            (toks, usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"])
        )
same = 0
for i, q in enumerate(QS):
    with Runtime(small_settings(model, state_dir=new_state_dir(), **kw)) as cold:
        toks, usage = answer(cold, [SYSTEM, {"role": "user", "content": q}])
    w = warm_out[i]
    print(
        i,
        "warm cached",
        w[1],
        "of",
        w[2],
        "| cold cached",
        usage["prompt_tokens_details"]["cached_tokens"],
        "| same" if toks == w[0] else "| DIFFERENT",
        flush=True,
    )
    same += toks == w[0]
print(shape, "same", same, "of", len(QS))
