"""Greedy output stays the same with drafts past 256 tokens of context: with kv_type = "q8_0"
the drafts are verified there; with f16 the engine's probe finds where verify runs stop rounding
as one-token steps, and no draft goes past it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import small_settings
from reame import metrics
from reame.runtime import Runtime

pytestmark = pytest.mark.model


def drafted_tokens() -> float:
    return sum(
        s.value
        for m in metrics.SPEC_DRAFTED.collect()
        for s in m.samples
        if s.name.endswith("_total")
    )


DOCUMENT = "Reame keeps what it has computed and uses it again. " * 30


def off_and_on(runtime: Runtime) -> tuple[list[int], list[int], float]:
    """A summary of DOCUMENT (past 256 tokens of context), greedy, with speculation off then
    forced on: both answers' tokens and the tokens drafted meanwhile."""
    service = runtime.service
    ask = f"{DOCUMENT}\n\nSummarize this text in a numbered list of five points."
    prompt = service.chat.prompt([{"role": "user", "content": ask}])
    assert len(prompt) > 256
    drafted = drafted_tokens()
    off, on = (
        service.generate(prompt, service.sampling(temperature=0, max_tokens=96, speculation=mode))
        for mode in ("off", "on")
    )
    assert len(off[0]) > 40
    return off[0], on[0], drafted_tokens() - drafted


def test_q8_0_kv_keeps_greedy_output_identical_with_drafts_on_a_long_context(
    smollm2_path: Path,
) -> None:
    settings = small_settings(smollm2_path, prefix_cache=False, palimpsest=False, kv_type="q8_0")
    with Runtime(settings) as runtime:
        assert "kv q8_0/q8_0" in runtime.context.kv_layout
        assert runtime.speculation.controller.exact_until is None
        off, on, drafted = off_and_on(runtime)
        assert drafted > 0  # the drafts were verified in batches
        assert on == off


def test_f16_kv_drafts_no_token_past_where_runs_round_otherwise(smollm2_path: Path) -> None:
    """Without the limit, the same prompt had its drafts verified in batches (f16 attention
    splits a lone decode past 256 cells), and a greedy answer could change with them."""
    settings = small_settings(smollm2_path, prefix_cache=False, palimpsest=False)
    with Runtime(settings) as runtime:
        assert "kv f16/f16" in runtime.context.kv_layout
        assert runtime.speculation.controller.exact_until == 256
        off, on, drafted = off_and_on(runtime)
        assert drafted == 0
        assert on == off
