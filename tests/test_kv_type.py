"""kv_type = "q8_0": greedy output stays the same with drafts past 256 tokens of context."""

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


def test_q8_0_kv_keeps_greedy_output_identical_with_drafts_on_a_long_context(
    smollm2_path: Path,
) -> None:
    settings = small_settings(smollm2_path, prefix_cache=False, palimpsest=False, kv_type="q8_0")
    with Runtime(settings) as runtime:
        assert "kv q8_0/q8_0" in runtime.context.kv_layout
        service = runtime.service
        ask = f"{DOCUMENT}\n\nSummarize this text in a numbered list of five points."
        prompt = service.chat.prompt([{"role": "user", "content": ask}])
        assert len(prompt) > 256
        drafted = drafted_tokens()
        off = service.generate(
            prompt, service.sampling(temperature=0, max_tokens=96, speculation="off")
        )
        on = service.generate(
            prompt, service.sampling(temperature=0, max_tokens=96, speculation="on")
        )
        assert drafted_tokens() > drafted  # the drafts were verified in batches
        assert on[0] == off[0]
        assert len(off[0]) > 40
