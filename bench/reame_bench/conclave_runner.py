"""`reame bench --conclave`: a quiz of short questions with known answers, each asked as one
greedy answer, as N sampled answers one after another, and as a Conclave of N (one group, one
prefill), with and without the early stop. In process, in turns, so every mode sees the same
noisy machine. The greedy answer comes first and leaves the prompt's KV in a free sequence,
so every mode starts from it (as repeated requests do on a server); the Palimpsest is off.

Candidate k of a Conclave draws with seed + k, as the k-th sequential request does: on a model
whose logits do not depend on the batch, the Conclave without early stop writes exactly the
tokens of the N sequential requests, so its wall time ratio compares like with like (a check
says whether the texts were the same).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from reame.conclave.answers import extract
from reame.conclave.convene import Verdict, convene
from reame.runtime import Runtime
from reame.sampling import SamplingParams
from reame.service import Job, Service

N = 5
TEMPERATURE = 0.7
SEQUENTIAL, CONCLAVE, CONCLAVE_ALL = "5 sequential", "conclave of 5", "conclave, no early stop"
ORDERS = tuple(itertools.permutations((SEQUENTIAL, CONCLAVE_ALL, CONCLAVE)))

# (question, answer, rule): easy enough that a 135M model gets some of them right
QUIZ = (
    ("What is 7 + 5? Reply with just the number.", "12", "number"),
    ("What is 9 - 4? Reply with just the number.", "5", "number"),
    ("What is 3 times 4? Reply with just the number.", "12", "number"),
    ("How many legs does a spider have? Reply with just the number.", "8", "number"),
    ("How many days are there in a week? Reply with just the number.", "7", "number"),
    ("What is 10 + 10? Reply with just the number.", "20", "number"),
    (
        "Which planet is known as the Red Planet? A) Venus B) Mars C) Jupiter D) Saturn. "
        "Reply with just the letter.",
        "B",
        "choice",
    ),
    (
        "What is the capital of France? A) Berlin B) Madrid C) Paris D) Rome. "
        "Reply with just the letter.",
        "C",
        "choice",
    ),
    (
        "Which animal is the largest? A) Blue whale B) Cat C) Mouse D) Ant. "
        "Reply with just the letter.",
        "A",
        "choice",
    ),
    (
        "What color is the sky on a clear day? A) Green B) Red C) Yellow D) Blue. "
        "Reply with just the letter.",
        "D",
        "choice",
    ),
)


@dataclass(slots=True)
class _Run:
    seconds: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    correct: dict[str, float] = field(default_factory=dict)  # questions answered right
    saved_estimate: int = 0
    stopped: int = 0
    same_tokens: bool = True  # the Conclave without early stop wrote the sequential texts
    same_winner: bool = True  # the early stop never changed the answer

    def add(self, key: str, seconds: float, tokens: int) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        self.tokens[key] = self.tokens.get(key, 0) + tokens

    def score(self, key: str, value: float) -> None:
        self.correct[key] = self.correct.get(key, 0.0) + value


async def bench_conclave(
    runtime: Runtime,
    runs: int,
    max_tokens: int,
    log: Callable[[str], None],
    num_questions: int = len(QUIZ),
    ignore_eos: bool = False,
) -> tuple[dict[str, dict[str, float]], dict[str, bool]]:
    """Rows of figures (medians over runs) and checks."""
    service = runtime.service
    quiz = QUIZ[:num_questions]
    results = []
    for run in range(runs):
        r = _Run()
        for i, (question, answer, rule) in enumerate(quiz):
            log(f"run {run + 1}/{runs}, question {i + 1}/{len(quiz)}")
            if service.model.chat_template is not None:
                prompt = service.chat.prompt([{"role": "user", "content": question}])
            else:
                prompt = service.text_prompt(f"Question: {question}\nAnswer:")
            options = {"max_tokens": max_tokens, "ignore_eos": ignore_eos or None}
            seed = 10_000 * (run + 1) + 100 * i
            job = Job(prompt, service.sampling(temperature=TEMPERATURE, seed=seed, **options))
            greedy, _ = _generate(service, prompt, service.sampling(temperature=0.0, **options))
            r.score("greedy", float(extract(greedy, rule) == answer))
            # NOTE: the order turns with each question, so no mode always goes first
            texts: list[str] = []
            verdicts: dict[bool, Verdict] = {}
            for mode in ORDERS[(run * len(quiz) + i) % len(ORDERS)]:
                if mode == SEQUENTIAL:
                    texts = _sequential(service, job, r, rule, answer)
                else:
                    early_stop = mode == CONCLAVE
                    verdicts[early_stop] = await _conclave(
                        service, job, r, rule, answer, early_stop
                    )
            whole, early = verdicts[False], verdicts[True]
            r.same_tokens &= [c.text for c in whole.candidates] == texts
            r.same_winner &= whole.tally.winner()[0] == early.tally.winner()[0]
            r.saved_estimate += early.tokens_saved
            r.stopped += len(early.tally.stopped)
        results.append(r)
    return _rows(results, len(quiz)), {
        "the Conclave without early stop wrote the same texts as the sequential requests": all(
            r.same_tokens for r in results
        ),
        "the early stop never changed the winning answer": all(r.same_winner for r in results),
    }


def _sequential(service: Service, job: Job, r: _Run, rule: str, answer: str) -> list[str]:
    """N requests of the job one after another, request k with seed + k."""
    seed = job.params.seed or 0
    started = time.perf_counter()
    outs = [
        _generate(service, job.prompt, job.params.model_copy(update={"seed": seed + k}))
        for k in range(N)
    ]
    r.add(SEQUENTIAL, time.perf_counter() - started, sum(n for _, n in outs))
    r.score(SEQUENTIAL, sum(extract(text, rule) == answer for text, _ in outs) / N)
    return [text for text, _ in outs]


async def _conclave(
    service: Service, job: Job, r: _Run, rule: str, answer: str, early_stop: bool
) -> Verdict:
    started = time.perf_counter()
    verdict = await convene(service, job, N, rule, early_stop)
    if verdict.failed is not None:
        raise RuntimeError(f"a Conclave failed: {verdict.failed.error or verdict.failed.reason}")
    key = CONCLAVE if early_stop else CONCLAVE_ALL
    r.add(key, time.perf_counter() - started, verdict.num_completion_tokens)
    r.score(key, float(verdict.tally.winner()[0] == answer))
    return verdict


def _generate(service: Service, prompt: list[int], params: SamplingParams) -> tuple[str, int]:
    _, text, finish = service.generate(prompt, params)
    if finish.reason not in ("stop", "length"):
        raise RuntimeError(f"a bench request ended with {finish.reason}: {finish.error}")
    return text, finish.num_completion_tokens


def _rows(results: list[_Run], num_questions: int) -> dict[str, dict[str, float]]:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    modes = (SEQUENTIAL, CONCLAVE_ALL, CONCLAVE)
    rows: dict[str, dict[str, float]] = {
        "wall time s (all questions)": {m: med([r.seconds[m] for r in results]) for m in modes},
        "tokens generated": {m: med([r.tokens[m] for r in results]) for m in modes},
        f"wall time / {SEQUENTIAL}": {
            m: med([r.seconds[m] / r.seconds[SEQUENTIAL] for r in results]) for m in modes
        },
        "accuracy": {
            "greedy": med([r.correct["greedy"] / num_questions for r in results]),
            "mean single sampled": med([r.correct[SEQUENTIAL] / num_questions for r in results]),
            CONCLAVE: med([r.correct[CONCLAVE] / num_questions for r in results]),
            CONCLAVE_ALL: med([r.correct[CONCLAVE_ALL] / num_questions for r in results]),
        },
        "early stop": {
            "candidates stopped": med([r.stopped for r in results]),
            "tokens saved (measured)": med(
                [r.tokens[CONCLAVE_ALL] - r.tokens[CONCLAVE] for r in results]
            ),
            "tokens saved (metric's estimate)": med([r.saved_estimate for r in results]),
        },
    }
    return rows
