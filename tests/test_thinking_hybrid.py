"""The history a template rewrote, computed ahead, on Qwen3.5's shape (the synthetic
`qwen3.5-tiny`: recurrent layers, which cannot be cut back): the state where the answer
started is a snapshot, and the next turn's greedy tokens equal a cold request's. Token ids are
compared: a random-weight model writes tokens of no text."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from conftest import small_settings
from reame.api.calls import Call
from reame.api.schemas import ChatRequest
from reame.api.served import Served
from reame.runtime import Runtime
from reame_bench.synthetic import build_synthetic
from state_dirs import new_state_dir

pytestmark = pytest.mark.model

TEMPLATE = Path(__file__).parent / "templates" / "chatml-think-open.jinja"
SYSTEM = {"role": "system", "content": "You answer questions about geography. " * 10}
FIRST = [SYSTEM, {"role": "user", "content": "What is the capital of Spain?"}]


def answer(runtime: Runtime, messages: list[dict]) -> tuple[list[int], dict, dict]:
    """The choice's token ids, its message and its usage."""
    served = Served(runtime.service, "tiny", frozenset({"tiny"}), 8)
    body = ChatRequest(
        model="tiny",
        messages=messages,
        temperature=0,
        max_tokens=32,
        logprobs=True,
        reasoning_budget=8,
        speculation="off",
    )

    async def call() -> tuple[list[int], dict]:
        c = Call(served, body, None)
        await c.start()
        response = await c.response()
        await asyncio.sleep(1.0)  # NOTE: the idle time in which the history is computed ahead
        return [e.token for e in c.choices[0].logprobs], response

    tokens, response = asyncio.run(call())
    return tokens, response["choices"][0]["message"], response["usage"]


def test_later_turns_after_their_history_ahead_write_a_cold_requests_tokens() -> None:
    tiny = build_synthetic("qwen3.5-tiny", new_state_dir(), num_threads=2)
    settings = small_settings(tiny, chat_template_file=TEMPLATE, state_dir=new_state_dir())
    turns, got = [], []
    with Runtime(settings) as warm:
        assert not warm.context.can_cut
        messages = list(FIRST)
        tokens, message, _ = answer(warm, messages)
        assert len(tokens) > 8  # the thought was closed, an answer followed
        for question in ("And of Portugal?", "And of Greece?"):
            time.sleep(0.5)
            messages = [*messages, message, {"role": "user", "content": question}]
            tokens, message, usage = answer(warm, messages)
            assert usage["prompt_tokens_details"]["cached_tokens"] >= usage["prompt_tokens"] - 16
            turns.append(list(messages))
            got.append(tokens)
    cold_settings = small_settings(
        tiny, chat_template_file=TEMPLATE, state_dir=new_state_dir(), prefix_cache=False
    )
    with Runtime(cold_settings) as cold:
        for messages, tokens in zip(turns, got, strict=True):
            expected, _, cold_usage = answer(cold, messages)
            assert cold_usage["prompt_tokens_details"]["cached_tokens"] == 0
            assert tokens == expected
