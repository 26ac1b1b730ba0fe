"""On the real SmolLM2: a request's drafts kept and refused come back in its usage (OpenAI's
accepted and rejected prediction tokens), streamed or not; and what the speculation controller
measured outlives a restart."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from conftest import small_settings
from reame.api.response_models import ChatCompletion, ChatCompletionChunk, TextCompletion
from reame.runtime import Runtime
from reame.speculation.controller import DrafterStats
from reame.speculation.controller_store import measured
from server_process import small_server
from state_dirs import new_state_dir

pytestmark = pytest.mark.model

QUESTION = "Write a JSON object with the keys name, age and city."
MODEL = "smollm2-135m"


def drafts_booked(runtime: Runtime) -> tuple[int, int]:
    drafters = runtime.speculation.controller.drafters.values()
    return sum(s.proposed for s in drafters), sum(s.accepted for s in drafters)


def test_a_repeated_request_reports_its_own_drafts(smollm2_path: Path) -> None:
    with Runtime(small_settings(smollm2_path)) as runtime:
        service = runtime.service
        prompt = service.chat.prompt([{"role": "user", "content": QUESTION}])
        params = service.sampling(temperature=0.0, max_tokens=64, speculation="on")
        plain, _, first = service.generate(prompt, params.model_copy(update={"speculation": "off"}))
        assert (first.num_accepted_drafts, first.num_rejected_drafts) == (0, 0)
        before = drafts_booked(runtime)
        tokens, _, again = service.generate(prompt, params)  # drafted from the archive
        proposed, accepted = (b - a for a, b in zip(before, drafts_booked(runtime), strict=True))
        assert tokens == plain
        assert again.num_accepted_drafts > len(tokens) // 2, again
        assert again.num_accepted_drafts + again.num_rejected_drafts == proposed
        assert again.num_accepted_drafts <= min(accepted, again.num_completion_tokens)


def test_the_controllers_figures_outlive_a_restart(smollm2_path: Path) -> None:
    state = new_state_dir()
    with Runtime(small_settings(smollm2_path, state_dir=state)) as first:
        service = first.service
        prompt = service.chat.prompt([{"role": "user", "content": QUESTION}])
        for _ in range(2):  # the second is drafted from the first's answer
            service.generate(prompt, service.sampling(temperature=0.0, max_tokens=48))
    saved = measured(first.speculation.controller)  # as it stood at close
    assert saved["drafters"] and len(saved["step_seconds"]) > 2  # type: ignore[arg-type]
    assert list((state / "speculation").glob("controller-*.json"))
    with Runtime(small_settings(smollm2_path, state_dir=state)) as second:
        restored = measured(second.speculation.controller)  # its warm-up step only since
        assert restored["drafters"] == saved["drafters"]
        assert set(restored["step_seconds"]) >= set(saved["step_seconds"])  # type: ignore[arg-type]
    with Runtime(small_settings(smollm2_path, state_dir=state, threads=1)) as other:
        # measured with 2 threads: not this one's figures (a fresh controller's)
        fresh = measured(other.speculation.controller)
        assert all(d["acceptance"] == DrafterStats().acceptance for d in fresh["drafters"].values())  # type: ignore[union-attr]
        assert not set(fresh["step_seconds"]) >= set(saved["step_seconds"])  # type: ignore[arg-type]


def test_usage_carries_the_prediction_tokens_over_http() -> None:
    server = small_server()
    try:
        client = OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0)
        messages = [{"role": "user", "content": QUESTION}]
        ask = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 48}
        # NOTE: computed again each time (drafted from the Palimpsest), not remembered
        on = {"extra_body": {"speculation": "on", "answer_memory": False}}
        first = client.chat.completions.create(**ask, extra_body={"speculation": "off"})
        details = first.usage.completion_tokens_details
        assert details.accepted_prediction_tokens == details.rejected_prediction_tokens == 0
        again = client.chat.completions.create(**ask, **on)
        assert again.choices[0].message.content == first.choices[0].message.content
        kept = again.usage.completion_tokens_details.accepted_prediction_tokens
        assert 0 < kept <= again.usage.completion_tokens
        chunks = list(
            client.chat.completions.create(
                **ask, **on, stream=True, stream_options={"include_usage": True}
            )
        )
        streamed = chunks[-1].usage.completion_tokens_details
        assert 0 < streamed.accepted_prediction_tokens <= chunks[-1].usage.completion_tokens
        # the bodies are what the OpenAPI document says (its strict response models)
        body = {**ask, "speculation": "on", "answer_memory": False}
        raw = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60).json()
        ChatCompletion.model_validate(raw)
        body |= {"stream": True, "stream_options": {"include_usage": True}}
        with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body) as r:
            frames = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
        assert frames[-1] == "[DONE]"
        last = ChatCompletionChunk.model_validate_json(frames[-2])
        assert last.usage is not None
        assert last.usage.completion_tokens_details.accepted_prediction_tokens > 0
        text = {"model": MODEL, "prompt": QUESTION, "max_tokens": 16, "temperature": 0}
        raw = httpx.post(f"{server.url}/v1/completions", json=text, timeout=60).json()
        usage = TextCompletion.model_validate(raw).usage
        assert usage.completion_tokens_details.rejected_prediction_tokens >= 0
    finally:
        assert server.stop() == 0
    assert list((server.state_dir / "speculation").glob("controller-*.json"))  # saved at stop
