"""Which answers the engine says were computed as a lone request computes them
(FinishEvent.is_exact, engine/exact_steps.py), on the real SmolLM2: the answer memory keeps
only those. An answer alone is exact; two prompts whose narrow chunks shared a llama_decode are
not; and an answer computed beside another that says it is exact is its lone answer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import small_settings
from reame.engine.request import FinishEvent
from reame.runtime import Runtime
from reame.service import Job


@pytest.fixture(scope="module")
def runtime(smollm2_path: Path) -> Iterator[Runtime]:
    with Runtime(small_settings(smollm2_path, prefix_cache=False, parallel=2)) as rt:
        yield rt


def prompt(runtime: Runtime, content: str) -> list[int]:
    return runtime.service.chat.prompt([{"role": "user", "content": content}])


def together(runtime: Runtime, prompts: list[list[int]]) -> list[tuple[str, FinishEvent]]:
    params = runtime.service.sampling(temperature=0.0, max_tokens=24, speculation="off")

    async def run() -> list[tuple[str, FinishEvent]]:
        texts: list[list[str]] = [[] for _ in prompts]
        ends: list[FinishEvent | None] = [None] * len(prompts)
        async for batch in runtime.service.astream_many([Job(p, params) for p in prompts]):
            for item in batch:
                texts[item.index].append(item.event.text)
                if isinstance(item.event, FinishEvent):
                    ends[item.index] = item.event
        return [("".join(t), e) for t, e in zip(texts, ends, strict=True) if e is not None]

    return asyncio.run(run())


def test_an_answer_computed_alone_is_exact(runtime: Runtime) -> None:
    ((_, finish),) = together(runtime, [prompt(runtime, "Name three colors.")])
    assert finish.is_exact


def test_prompts_whose_narrow_chunks_would_share_a_decode_are_computed_apart_and_exact(
    runtime: Runtime,
) -> None:
    """Narrow chunks side by side may round otherwise than alone (the probe does not measure
    them): the runner computes them apart, so the answers are their lone answers, and kept
    (before, one decode, and both answers marked not exact)."""
    one, two = prompt(runtime, "Name three colors."), prompt(runtime, "Name three birds.")
    assert len(one) == len(two) < 64  # one narrow chunk each, of one size
    alone = [together(runtime, [p])[0][0] for p in (one, two)]
    side_by_side = together(runtime, [one, two])
    # NOTE: their answers then step together, exact where the probe found it so (this
    # machine did: the test below)
    exact = runtime.engine.paths.neighbours >= 2
    assert [f.is_exact for _, f in side_by_side] == [exact, exact]
    if exact:
        assert [text for text, _ in side_by_side] == alone


def test_an_answer_that_says_it_is_exact_beside_another_is_its_lone_answer(
    runtime: Runtime,
) -> None:
    one = prompt(runtime, "Name three colors.")
    two = prompt(runtime, "Write one sentence about the sea and the sky.")
    assert len(one) != len(two)  # the prompts are computed apart; the answers step together
    alone = [together(runtime, [p])[0][0] for p in (one, two)]
    side_by_side = together(runtime, [one, two])
    for (text, finish), lone in zip(side_by_side, alone, strict=True):
        # NOTE: where the probe found one token of each sequence exact (this machine did)
        assert finish.is_exact == (runtime.engine.paths.neighbours >= 2)
        if finish.is_exact:
            assert text == lone
