"""`reame bench --conclave` and `--structure`: benches that run only in process."""

from __future__ import annotations

import argparse
import asyncio

from reame.errors import ConfigError
from reame.runtime import Runtime
from reame_bench.cli.settings import bench_settings, progress


def bench_conclave(args: argparse.Namespace) -> int:
    from reame_bench.conclave_runner import QUIZ, N
    from reame_bench.conclave_runner import bench_conclave as run_conclave

    if args.url or args.runs < 1:
        raise ConfigError("--conclave runs in process, with --runs of at least 1 and no --url")
    # NOTE: no Palimpsest: every mode writes the same seeded texts, and whichever came later
    # would draft them from the archive the earlier one filled
    settings = bench_settings(args).model_copy(update={"palimpsest": False})
    if settings.parallel is None:  # NOTE: --parallel below N measures candidates that wait
        settings = settings.model_copy(update={"parallel": N})
    # NOTE: a synthetic model writes noise: every candidate runs to max_tokens, its answers are
    # no answers, and 3 questions time it as well as 10
    questions = 3 if args.synthetic else len(QUIZ)
    with Runtime(settings) as runtime:
        rows, checks = asyncio.run(
            run_conclave(
                runtime,
                args.runs,
                args.max_tokens,
                progress,
                num_questions=questions,
                ignore_eos=bool(args.synthetic),
            )
        )
        print(f"model: {runtime.model.name}; threads {runtime.tuned.threads}; runs {args.runs}")
    for title, row in rows.items():
        print(f"== {title}")
        for key, value in row.items():
            print(f"  {key:<40} {value:10.3f}")
    for name, ok in checks.items():
        print(f"{'yes' if ok else 'NO '}  {name}")
    return 0


def bench_structure(args: argparse.Namespace) -> int:
    from reame_bench import structure_report
    from reame_bench.structure_engines import bench_in_process

    if args.url or args.in_process or args.runs < 1:
        raise ConfigError("--structure runs in process, with --runs of at least 1 and no --url")
    settings = bench_settings(args)
    report = bench_in_process(settings, args.runs, progress)
    header = {"model": str(settings.model_path or settings.model), "runs": args.runs}
    print((structure_report.as_json if args.json else structure_report.as_table)(header, report))
    return 0
