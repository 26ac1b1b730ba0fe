"""`reame bench --exam`: how often the answers are right, not how fast they come.

A document and its questions (exam_score.py) go to each --url server as chats: the document in
the system message, one question a request, greedy, each answer scored right, missing or
invented, with its time to first token and the exam's wall time. With --best-of N each server
is examined again with a Conclave of N (Reame's `best_of`; a server that refuses it, or ignores
it, is left out of that row). --needles N plants N facts at even depths of the document and
asks each: the N-needle test, from any long text.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reame_bench.exam_score import Question, Tally, read_exam, score
from reame_bench.sse_reader import ChunkTally
from reame_bench.targets import HttpTarget

EXAM_DIR = Path(__file__).parent / "data" / "exam"
INSTRUCTIONS = (
    "Answer the question from the document below only, in one short sentence. If the document "
    "does not say, answer that it does not say.\n\nDocument:\n"
)
ANSWER_TOKENS = 64
_COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "purple", "grey", "pink")


@dataclass(slots=True)
class Sitting:
    """One target's answers to the exam."""

    tally: Tally = field(default_factory=Tally)
    ttft: list[float] = field(default_factory=list)
    wall: float = 0.0
    answers: list[dict[str, str]] = field(default_factory=list)


def load_exam(document: Path, questions: Path) -> tuple[str, list[Question]]:
    """The document's text and its questions (JSONL); a ValueError naming a bad line."""
    lines = []
    for number, line in enumerate(questions.read_text().splitlines(), start=1):
        if line.strip():
            try:
                lines.append(json.loads(line))
            except ValueError as exc:
                raise ValueError(f"{questions}:{number}: not JSON ({exc})") from exc
    return document.read_text(), read_exam(lines)


def plant_needles(haystack: str, count: int) -> tuple[str, list[Question]]:
    """`count` facts ("The code of the red door is 4127.") planted at even depths of
    `haystack` (between its paragraphs, else its sentences), and a question for each."""
    if not 1 <= count <= len(_COLOURS):
        raise ValueError(f"--needles is 1 to {len(_COLOURS)}")
    parts = [p for p in haystack.split("\n\n") if p.strip()]
    if len(parts) <= count:
        parts = [s.strip() + "." for s in haystack.split(".") if s.strip()]
    total = len(parts)
    codes = [1000 + (7919 * (k + 1)) % 9000 for k in range(count)]
    questions = []
    for k, code in enumerate(codes):
        colour = _COLOURS[k]
        at = round((k + 1) * total / (count + 1))
        parts.insert(at + k, f"The code of the {colour} door is {code}.")
        others = tuple(rf"\b{c}\b" for c in codes if c != code)  # another door's: wrong
        question = f"What is the code of the {colour} door?"
        questions.append(Question(question, accept=(rf"\b{code}\b",), reject=others))
    return "\n\n".join(parts), questions


async def sit(
    target: HttpTarget,
    document: str,
    questions: Sequence[Question],
    best_of: int | None,
    log: Callable[[str], None],
    completions: bool = False,
) -> Sitting | None:
    """The target's answers, or None if it refuses the Conclave asked for. `completions`: each
    question as a raw prompt, the answer to its end of line (a base model, without a chat
    template)."""
    if best_of is not None and not await _holds_conclaves(target, best_of, completions):
        log(f"{target.name}: no Conclave (its answer to best_of has no tally)")
        return None
    sitting = Sitting()
    began = time.perf_counter()
    for number, question in enumerate(questions, start=1):
        body: dict[str, Any] = {
            "model": target.model,
            **_asked(document, question.question, completions),
            "max_tokens": ANSWER_TOKENS,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if best_of is not None:
            body |= {"best_of": best_of, "vote_on": "line"}
        timeline = await target.stream_body(body, ChunkTally)
        answer = timeline.text.strip()
        verdict = score(answer, question, document)
        sitting.tally.add(verdict)
        sitting.ttft.append(timeline.ttft)
        sitting.answers.append({"question": question.question, "answer": answer, "score": verdict})
        log(f"{target.name}: {number}/{len(questions)} {verdict}")
    sitting.wall = time.perf_counter() - began
    return sitting


def _asked(document: str, question: str, completions: bool) -> dict[str, Any]:
    """A question as a chat, or as a raw prompt answered to its end of line."""
    if completions:
        prompt = f"{INSTRUCTIONS}{document}\n\nQuestion: {question}\nAnswer:"
        return {"prompt": prompt, "stop": ["\n"]}
    return {
        "messages": [
            {"role": "system", "content": INSTRUCTIONS + document},
            {"role": "user", "content": question},
        ]
    }


async def _holds_conclaves(target: HttpTarget, best_of: int, completions: bool) -> bool:
    """Whether the server runs a Conclave: a server that ignores `best_of` (llama-server)
    answers without a tally."""
    say = "Say yes."
    asked = {"prompt": say} if completions else {"messages": [{"role": "user", "content": say}]}
    body = {"model": target.model, **asked, "max_tokens": 2, "best_of": best_of}
    path = "/v1/completions" if completions else "/v1/chat/completions"
    answer = await target.post(path, body)
    return answer is not None and "conclave" in answer


def report(sittings: dict[str, Sitting], num_questions: int) -> str:
    """One row a target (and Conclave): right, missing, invented, time to first token, wall."""
    rows = [("target", "right", "missing", "invented", "median ttft s", "wall s")]
    for name, s in sittings.items():
        c = s.tally.counts
        rows.append(
            (
                name,
                f"{c['right']}/{num_questions}",
                str(c["missing"]),
                str(c["invented"]),
                f"{statistics.median(s.ttft):.3f}",
                f"{s.wall:.1f}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows)
