"""`reame bench --exam`: a fact exam against --url servers (exam_runner.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from reame.errors import ConfigError
from reame_bench.cli.settings import progress


def add_flags(p: argparse.ArgumentParser) -> None:
    ex = p.add_argument_group("fact exam: how often the answers are right, against --url servers")
    ex.add_argument(
        "--exam",
        type=Path,
        metavar="DOCUMENT",
        help="a text file the questions are about (`example`: the exam that ships with the "
        "bench); each answer scored right, missing or invented, with time to first token",
    )
    ex.add_argument(
        "--exam-questions",
        type=Path,
        metavar="JSONL",
        help="one question a line: {question, accept: [regex], reject: [regex]} or {question, "
        "absent: true} (default: DOCUMENT with .jsonl for .txt)",
    )
    ex.add_argument(
        "--needles",
        type=int,
        help="instead of questions: plant this many facts at even depths of DOCUMENT and ask "
        "each (the N-needle test)",
    )
    ex.add_argument(
        "--best-of",
        type=int,
        help="also sit each server's exam as a Conclave of N (Reame's best_of)",
    )
    ex.add_argument(
        "--exam-completions",
        action="store_true",
        help="ask each question as a raw prompt (completions), answered to its end of line: for "
        "a base model without a chat template",
    )
    ex.add_argument("--answers", type=Path, help="write every answer and its score here (JSON)")


def bench_exam(args: argparse.Namespace) -> int:
    from reame_bench.exam_runner import EXAM_DIR, load_exam, plant_needles, report, sit
    from reame_bench.targets import HttpTarget, target_names

    if not args.url:
        raise ConfigError("--exam examines --url servers: give at least one")
    if args.best_of is not None and args.best_of < 2:
        raise ConfigError("--best-of is a Conclave of 2 or more candidates")
    document = EXAM_DIR / "hotel.txt" if str(args.exam) == "example" else args.exam
    try:
        if args.needles is not None:
            text, questions = plant_needles(document.read_text(), args.needles)
        else:
            questions_path = args.exam_questions or document.with_suffix(".jsonl")
            text, questions = load_exam(document, questions_path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--exam: {exc}") from exc

    async def run() -> dict:
        sittings, answers = {}, {}
        names = target_names(args.url, args.name, False)
        for url, name in zip(args.url, names, strict=True):
            target = await HttpTarget.open(url, name, args.api_key)
            try:
                for best_of in (None, args.best_of) if args.best_of else (None,):
                    label = name if best_of is None else f"{name}, Conclave of {best_of}"
                    sitting = await sit(
                        target, text, questions, best_of, progress, args.exam_completions
                    )
                    if sitting is not None:
                        sittings[label], answers[label] = sitting, sitting.answers
            finally:
                await target.aclose()
        return {"sittings": sittings, "answers": answers}

    done = asyncio.run(run())
    print(f"exam: {document.name}, {len(questions)} questions")
    print(report(done["sittings"], len(questions)))
    if args.answers is not None:
        args.answers.write_text(json.dumps(done["answers"], indent=1, ensure_ascii=False))
    return 0
