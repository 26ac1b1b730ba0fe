"""`reame bench --prefix`: what the prefix cache saves, against any OpenAI-compatible servers.

(a) a shared 1.5k-word system prompt with varied questions: time to first token cold (or, with
    --after-restart, the first request after the servers restarted) and warm;
(b) a multi-turn conversation: time to first token and reused prompt tokens per turn;
(c) an overlap sweep: requests sharing 100, 75, 50, 25 and 0% of a 2k-word prefix that the
    target has seen once (in that order: a server that keeps one prompt per slot still holds
    the shared head of the previous one);
(d) questions that share their first words behind the system prompt of (a): "Question N:"
    then a few words (a short shared opening), and a 120-word passage then a few words (a
    long one), each seen once and then asked again with other words;
(e) over HTTP, against servers that answer POST /v1/warm (Reame's): a 1.5k-word document
    warmed before its question, against a question over a document not seen before;
(f) over HTTP, against servers that answer POST /v1/responses: a chain of ten calls behind a
    1.5k-word instruction, the time of each call, each server its best way (chained by
    previous_response_id where the server keeps the conversation, else the whole conversation
    sent every call), and every server sent the whole conversation.

Targets run one after another, never interleaved: each one's cache state is the point. Prompts
are seeded, so a second invocation (after restarting the servers) sends the same ones.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence

from reame_bench.http_runner import HttpFigures, Samples, aggregate_tps, summarize
from reame_bench.targets import Messages, Target
from reame_bench.workloads import filler_text, topics

SYSTEM_WORDS = 1500
SWEEP_WORDS = 2000
SHARES = (100, 75, 50, 25, 0)
TURNS = 4
ANSWER_TOKENS = 2  # only the time to first token matters here
TURN_ANSWER_TOKENS = 24
SWEEP_ANSWER_TOKENS = 64  # enough tokens for a decode rate (speculation as the server sets it)
COLD, WARM, RESTARTED = "cold s", "warm s", "first after restart s"
CHAIN_CALLS = 10
CHAIN_ANSWER_TOKENS = 16


def system_prompt(seed: int = 1501) -> str:
    return "Answer in one short sentence. " + filler_text(seed=seed, num_words=SYSTEM_WORDS)


def questions(count: int) -> list[str]:
    return [f"{q} ({filler_text(seed=900 + i, num_words=2)})" for i, q in enumerate(topics(count))]


def chat(system: str, question: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def openings(count: int) -> dict[str, list[str]]:
    """(d)'s questions: a short and a long shared opening, then different words."""
    passage = filler_text(seed=4001, num_words=120)
    words = [filler_text(seed=950 + i, num_words=4) for i in range(count)]
    return {
        "short opening": [f"Question {i + 1}: {w}?" for i, w in enumerate(words)],
        "120-word opening": [f"{passage} Question: {w}?" for w in words],
    }


def sweep_prompt(share: int) -> Messages:
    """SWEEP_WORDS words of which the first share% are the shared prefix."""
    shared = filler_text(seed=2001, num_words=SWEEP_WORDS).split()
    keep = SWEEP_WORDS * share // 100
    other = filler_text(seed=3000 + share, num_words=SWEEP_WORDS - keep).split()
    words = shared[:keep] + other
    return [{"role": "user", "content": " ".join(words) + " Summarize this text."}]


Restart = Callable[[], Awaitable[None]]


async def shared_system(
    target: Target, runs: int, after_restart: bool, restart: Restart | None, samples: Samples
) -> None:
    system, qs = system_prompt(), questions(runs + 2)
    first = await target.stream(chat(system, qs[0]), ANSWER_TOKENS)
    samples[RESTARTED if after_restart else COLD][target.name] = [first.ttft]
    warm = [(await target.stream(chat(system, q), ANSWER_TOKENS)).ttft for q in qs[1 : runs + 1]]
    samples[WARM][target.name] = [statistics.median(warm)]
    samples["warm reused tokens"][target.name] = [
        float((await target.stream(chat(system, qs[runs + 1]), ANSWER_TOKENS)).num_cached_tokens)
    ]
    if restart is not None and not after_restart:
        await restart()
        again = await target.stream(chat(system, qs[0] + " Again."), ANSWER_TOKENS)
        samples[RESTARTED][target.name] = [again.ttft]


async def multi_turn(target: Target, samples: Samples) -> None:
    messages = [{"role": "system", "content": system_prompt()}]
    for turn, q in enumerate(questions(TURNS), start=1):
        messages.append({"role": "user", "content": q})
        t = await target.stream(messages, TURN_ANSWER_TOKENS)
        samples[f"turn {turn} s"][target.name] = [t.ttft]
        samples[f"turn {turn} reused tokens"][target.name] = [float(t.num_cached_tokens)]
        messages.append({"role": "assistant", "content": t.text})


async def overlap_sweep(target: Target, samples: Samples) -> None:
    await target.stream(sweep_prompt(100), ANSWER_TOKENS)  # seen once
    for share in SHARES:
        t = await target.stream(sweep_prompt(share), SWEEP_ANSWER_TOKENS)
        samples[f"share {share}% s"][target.name] = [t.ttft]
        samples[f"share {share}% reused tokens"][target.name] = [float(t.num_cached_tokens)]
        samples[f"share {share}% decode tok/s"][target.name] = [aggregate_tps([t])]


async def shared_openings(target: Target, runs: int, samples: Samples) -> None:
    system = system_prompt()
    for label, qs in openings(runs + 1).items():
        await target.stream(chat(system, qs[0]), ANSWER_TOKENS)  # seen once
        timed = [await target.stream(chat(system, q), ANSWER_TOKENS) for q in qs[1:]]
        samples[f"{label} s"][target.name] = [statistics.median(t.ttft for t in timed)]
        samples[f"{label} reused tokens"][target.name] = [
            statistics.median(float(t.num_cached_tokens) for t in timed)
        ]


async def warmed_document(target: Target, runs: int, samples: Samples) -> None:
    """A document sent to POST /v1/warm before its question, against a question over a
    document the server has not seen: each run two new documents (seeded by the run: fresh
    servers see them first)."""
    warm = getattr(target, "warm", None)
    if warm is None:  # NOTE: in process there is no route to call
        return
    cold, warmed, warming, reused = [], [], [], []
    for run in range(runs):
        unseen, document = (
            [{"role": "system", "content": system_prompt(seed=7000 + 2 * run + k)}] for k in (0, 1)
        )
        question = {"role": "user", "content": questions(1)[0]}
        began = time.perf_counter()
        if await warm(document) is None:
            return  # NOTE: the server has no such route
        warming.append(time.perf_counter() - began)
        cold.append((await target.stream([*unseen, question], ANSWER_TOKENS)).ttft)
        asked = await target.stream([*document, question], ANSWER_TOKENS)
        warmed.append(asked.ttft)
        reused.append(float(asked.num_cached_tokens))
    samples["question on an unseen document s"][target.name] = [statistics.median(cold)]
    samples["question after POST /v1/warm s"][target.name] = [statistics.median(warmed)]
    samples["the warm itself s"][target.name] = [statistics.median(warming)]
    samples["question after the warm, reused tokens"][target.name] = [statistics.median(reused)]


async def responses_chain(target: Target, runs: int, samples: Samples) -> None:
    """(f): each run two new instructions (seeded by the run), one chained and one sent whole;
    a server that does not keep the conversation (its stored response is not found) is timed
    sending it whole for both."""
    respond = getattr(target, "respond", None)
    if respond is None:  # NOTE: in process there is no route to call
        return
    best: list[list[float]] = [[] for _ in range(CHAIN_CALLS)]
    whole: list[list[float]] = [[] for _ in range(CHAIN_CALLS)]
    cached: list[list[float]] = [[] for _ in range(CHAIN_CALLS)]
    written: list[float] = []  # NOTE: calls are timed whole, so their answers' lengths count
    keeps = 1.0
    for run in range(runs):
        for chained in (True, False):
            instructions = system_prompt(seed=8000 + 2 * run + chained)
            items: list[dict[str, object]] = []
            previous: str | None = None
            for call, question in enumerate(questions(CHAIN_CALLS)):
                asked = {"role": "user", "content": question}
                body: dict[str, object] = {
                    "instructions": instructions,
                    "max_output_tokens": CHAIN_ANSWER_TOKENS,
                    "temperature": 0.0,
                }
                if chained and previous is not None and keeps:
                    body |= {"input": [asked], "previous_response_id": previous}
                else:
                    body["input"] = [*items, asked]
                began = time.perf_counter()
                made = await respond(body)
                took = time.perf_counter() - began
                if made is None and chained and previous is not None:
                    keeps, body["input"] = 0.0, [*items, asked]
                    body.pop("previous_response_id")
                    began = time.perf_counter()
                    made = await respond(body)
                    took = time.perf_counter() - began
                if made is None:
                    raise ValueError(f"{target.name}: POST /v1/responses refused {body}")
                previous = made["id"]
                said = "".join(
                    part.get("text", "")
                    for item in made["output"]
                    if item.get("type") == "message"
                    for part in item.get("content") or []
                )
                # NOTE: llama-server takes an assistant's turn only as a typed message item
                items += [asked, {"type": "message", "role": "assistant", "content": said}]
                (best if chained else whole)[call].append(took)
                if chained:
                    usage = made.get("usage") or {}
                    details = usage.get("input_tokens_details") or {}
                    cached[call].append(float(details.get("cached_tokens") or 0))
                    if call > 0:
                        written.append(float(usage.get("output_tokens") or 0))
    for call in range(CHAIN_CALLS):
        samples[f"call {call + 1} s"][target.name] = [statistics.median(best[call])]
        samples[f"call {call + 1} cached tokens"][target.name] = [statistics.median(cached[call])]
    later = [t for times in best[1:] for t in times]
    samples["calls 2-10, median s"][target.name] = [statistics.median(later)]
    samples["whole conversation every call: calls 2-10, median s"][target.name] = [
        statistics.median(t for times in whole[1:] for t in times)
    ]
    samples["calls 2-10, mean output tokens"][target.name] = [statistics.mean(written)]
    samples["kept the conversation (1: chained)"][target.name] = [keeps]


async def bench_prefix(
    targets: Sequence[Target],
    runs: int,
    after_restart: bool,
    restarts: dict[str, Restart],
    log: Callable[[str], None],
) -> dict[str, HttpFigures]:
    """One table per workload; ratios against the first target."""
    names = [t.name for t in targets]
    # title -> metric -> target -> values, rows in the order they were first written
    tables: defaultdict[str, Samples] = defaultdict(lambda: defaultdict(dict))
    for target in targets:
        log(f"{target.name}: shared system prompt")
        await shared_system(
            target,
            runs,
            after_restart,
            restarts.get(target.name),
            tables["(a) shared system prompt, time to first token"],
        )
        if after_restart:
            continue  # the rest would only measure warm caches again
        log(f"{target.name}: multi-turn")
        await multi_turn(target, tables["(b) multi-turn"])
        log(f"{target.name}: overlap sweep")
        await overlap_sweep(target, tables["(c) overlap sweep"])
        log(f"{target.name}: shared openings")
        await shared_openings(target, runs, tables["(d) questions sharing their first words"])
        log(f"{target.name}: a document warmed before its question")
        await warmed_document(target, runs, tables["(e) a document warmed before its question"])
        log(f"{target.name}: a Responses chain")
        await responses_chain(target, runs, tables["(f) a Responses chain of ten calls"])
    out = {}
    for title, samples in tables.items():
        complete = {m: v for m, v in samples.items() if set(v) == set(names)}
        out[title] = summarize(complete, names)
    return out
