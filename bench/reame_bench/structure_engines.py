"""The two engines `reame bench --structure` compares: Reame in this process with Il Suggeritore
on and with it off, on the same model and settings, the Palimpsest and the prefix cache off (no
earlier answer or prompt can help either one)."""

from __future__ import annotations

import time
from collections.abc import Callable

from reame.config import Settings
from reame.engine.request import FinishEvent, TokenEvent
from reame.runtime import Runtime
from reame.speculation.controller import SpecController
from reame_bench.sse_reader import BenchTargetError
from reame_bench.structure_runner import (
    ANSWER_TOKENS,
    ON,
    PLAIN,
    Answer,
    DraftFigures,
    StructureReport,
    bench_structure,
)

STEP_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32)


def bench_in_process(settings: Settings, runs: int, log: Callable[[str], None]) -> StructureReport:
    common = {"palimpsest": False, "prefix_cache": False, "spec": "auto"}
    log("structure: loading the model twice (Il Suggeritore on, off)")
    with (
        Runtime(settings.model_copy(update={**common, "suggeritore": True})) as on,
        Runtime(settings.model_copy(update={**common, "suggeritore": False})) as off,
    ):

        def ask(mode: str, prompt: str) -> Answer:
            if mode == ON:
                return answer(on, prompt, "auto")
            return answer(off, prompt, "off" if mode == PLAIN else "auto")

        def drafted(mode: str) -> dict[str, DraftFigures]:
            engine = on if mode == ON else off
            return {
                name: DraftFigures(s.runs, s.proposed, s.accepted)
                for name, s in engine.speculation.controller.drafters.items()
            }

        report = bench_structure(ask, drafted, runs, log)
        report.step_costs = step_costs(on.speculation.controller)
        tuned = on.tuned
        report.setup = (
            f"{on.model.name}, {tuned.threads} threads, {tuned.parallel} sequences, "
            f"context {tuned.context_length}, answers of at most {ANSWER_TOKENS} tokens"
        )
    return report


def answer(runtime: Runtime, prompt: str, speculation: str) -> Answer:
    """A greedy chat answer, to its end or ANSWER_TOKENS, with its decode time."""
    service = runtime.service
    tokens = service.chat.prompt([{"role": "user", "content": prompt}])
    params = service.sampling(temperature=0.0, max_tokens=ANSWER_TOKENS, speculation=speculation)
    out: list[int] = []
    first = last = 0.0
    for event in service.stream(tokens, params):
        if isinstance(event, TokenEvent):
            last = time.perf_counter()
            first = first or last
            out.append(event.token)
        elif isinstance(event, FinishEvent) and event.reason == "error":
            raise BenchTargetError(f"the engine failed a bench request: {event.error}")
    return Answer(out, last - first)


def step_costs(controller: SpecController) -> dict[int, float]:
    """What a step of k tokens cost here, as the controller measured it, over a 1-token step."""
    one = controller.step_seconds.get(1)
    if not one:
        return {}
    return {k: controller.step_seconds[k] / one for k in STEP_SIZES if k in controller.step_seconds}
