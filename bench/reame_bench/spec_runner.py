"""`reame bench --spec`: what speculation gives, and costs, in each mode (off, on, auto).

(a) repeated requests: the same questions again, reworded, and a similar document regenerated
    (the same request about another subject), after one round that taught the archive; and
    after a restart (--after-restart, or in process), each question asked in auto first, so
    its drafts can only come from what was kept on disk;
(b) adversarial: questions that share nothing with anything earlier (each mode its own);
(c) 4 concurrent streams of repeated questions.
Every mode of a target goes to the same server (a request's `speculation` field), in turns.
Greedy decoding throughout; a check says whether every mode's answer to a prompt was the same
text as with speculation off.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence

from reame_bench.http_runner import HttpFigures, Samples, aggregate_tps, summarize
from reame_bench.targets import Messages, Target
from reame_bench.workloads import filler_text, topics

MODES = ("off", "on", "auto")
AFTER_RESTART = "same questions, first after a restart (auto first)"
AFTER_RESTART_ORDER = ("auto", "on", "off")
ANSWER_TOKENS = 128
NUM_QUESTIONS = 6

Restart = Callable[[], Awaitable[None]]


def user(content: str) -> Messages:
    return [{"role": "user", "content": content}]


def completion_prompt(content: str) -> str:
    """For a base model (no chat template): the question as the start of a text."""
    return f"Question: {content}\nAnswer:"


def questions() -> list[str]:
    return topics(NUM_QUESTIONS)


def reworded(question: str) -> str:
    return f"Please answer this. {question}"


LIBRARIES = ("tablesaw", "quickcsv", "rowan", "csvtool", "ledgerly", "colfax", "tabular", "gridly")


def library(i: int) -> str:
    return LIBRARIES[i % len(LIBRARIES)] + (str(i // len(LIBRARIES)) if i >= len(LIBRARIES) else "")


def document(name: str) -> str:
    return (
        f"Write the README of {name}, a small Python library that reads CSV files into lists "
        "of dictionaries: a title, an installation section, a usage example and a license line."
    )


def fresh(run: int, mode: str) -> str:
    """A question nothing earlier shares (a new one for each run and mode)."""
    seed = 70_000 + 10 * run + MODES.index(mode)
    return f"{filler_text(seed, 5).capitalize()}: continue this text about {filler_text(seed, 2)}."


class _Bench:
    def __init__(
        self, target: Target, log: Callable[[str], None], as_text: bool, answer_tokens: int
    ) -> None:
        self.target, self.log, self.answer_tokens = target, log, answer_tokens
        self.request = completion_prompt if as_text else user
        self.answers: dict[str, str] = {}  # prompt -> the answer with speculation off
        # one stream at a time, and streams sharing a batch (where rounding may differ anyway)
        self.is_identical = {"alone": True, "together": True}

    def column(self, mode: str) -> str:
        return f"{self.target.name} {mode}"

    async def ask(self, content: str, mode: str) -> float:
        t = await self.target.stream(self.request(content), self.answer_tokens, speculation=mode)
        self._compare(content, mode, t.text)
        return aggregate_tps([t])

    async def ask_together(self, contents: Sequence[str], mode: str) -> float:
        group = await asyncio.gather(
            *(
                self.target.stream(self.request(c), self.answer_tokens, speculation=mode)
                for c in contents
            )
        )
        for c, t in zip(contents, group, strict=True):
            self._compare(c, mode, t.text, "together")
        return aggregate_tps(group)

    def _compare(self, content: str, mode: str, text: str, how: str = "alone") -> None:
        if mode == "off":
            self.answers.setdefault(content, text)
        if content in self.answers and self.answers[content] != text:
            self.is_identical[how] = False

    async def rounds(self, prompts: Sequence[str], runs: int, samples: Samples, row: str) -> None:
        for run in range(runs):
            order = MODES[run % 3 :] + MODES[: run % 3]
            await self.each(prompts, order, samples, row)

    async def each(
        self, prompts: Sequence[str], order: Sequence[str], samples: Samples, row: str
    ) -> None:
        for content in prompts:
            for mode in order:
                samples[row].setdefault(self.column(mode), []).append(await self.ask(content, mode))


async def bench_spec(
    targets: Sequence[Target],
    runs: int,
    after_restart: bool,
    restarts: dict[str, Restart],
    log: Callable[[str], None],
    as_text: bool = False,
    answer_tokens: int = ANSWER_TOKENS,
) -> tuple[dict[str, HttpFigures], dict[str, bool]]:
    """One table per workload, a column per target and mode, ratios against the first;
    `as_text`: completions of a text prompt (a base model), not chats; `answer_tokens`: at
    most, an answer."""
    tables: defaultdict[str, Samples] = defaultdict(lambda: defaultdict(dict))
    checks: dict[str, bool] = {}
    columns: list[str] = []
    qs = questions()
    for target in targets:
        b = _Bench(target, log, as_text, answer_tokens)
        columns += [b.column(m) for m in MODES]
        rep = tables["(a) repeated requests, decode tok/s"]
        if not after_restart:
            log(f"{target.name}: teaching round")
            for q in qs:
                await b.ask(q, "off")
                await b.ask(reworded(q), "off")
            await b.ask(document(library(0)), "off")
        else:
            # auto first: what the archive on disk gives, before this run teaches it anything
            # (the answers with speculation off come from this run's own off requests)
            log(f"{target.name}: first requests after a restart")
            await b.each(qs, AFTER_RESTART_ORDER, rep, AFTER_RESTART)
        log(f"{target.name}: repeated")
        await b.rounds(qs, runs, rep, "same questions")
        await b.rounds([reworded(q) for q in qs], max(1, runs // 2), rep, "reworded")
        # each mode regenerates the document about a subject no earlier request had
        for run in range(runs):
            for i, mode in enumerate(MODES):
                name = library(1 + 3 * run + i)
                rep["similar document"].setdefault(b.column(mode), []).append(
                    await b.ask(document(name), mode)
                )
        if not after_restart and target.name in restarts:
            log(f"{target.name}: restart")
            await restarts[target.name]()
            await b.each(qs, AFTER_RESTART_ORDER, rep, AFTER_RESTART)
        if after_restart:
            continue
        log(f"{target.name}: adversarial")
        adv = tables["(b) adversarial: nothing shared, decode tok/s"]
        for run in range(runs):
            for mode in MODES:
                adv["new questions"].setdefault(b.column(mode), []).append(
                    await b.ask(fresh(run, mode), mode)
                )
        log(f"{target.name}: 4 concurrent")
        together = tables["(c) 4 concurrent streams of repeated questions, aggregate tok/s"]
        for run in range(runs):
            group = [qs[(run + i) % len(qs)] for i in range(4)]
            for mode in MODES:
                together["4 streams"].setdefault(b.column(mode), []).append(
                    await b.ask_together(group, mode)
                )
        name = f"{target.name}: greedy answers identical in every mode"
        checks[f"{name}, one stream at a time"] = b.is_identical["alone"]
        checks[f"{name}, 4 streams in one batch"] = b.is_identical["together"]
    out = {}
    for title, samples in tables.items():
        complete = {m: v for m, v in samples.items() if set(v) == set(columns)}
        out[title] = summarize(complete, columns)
    return out, checks
