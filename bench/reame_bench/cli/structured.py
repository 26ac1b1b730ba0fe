"""`reame bench --structured`'s flags and entry point (flags.py and main.py only
wire them in)."""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

from reame.errors import ConfigError

# Reame started twice (forced runs off, then on): the slots and context llama-server is run
# with beside it (-np 2 -c 8192: 4096 tokens a slot)
STARTED_PARALLEL = 2
STARTED_CONTEXT = 4096
_OTHER_MODES = ("load", "soak", "prefix", "spec", "structure", "conclave", "in_process")


def add_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("structured outputs")
    g.add_argument(
        "--structured",
        action="store_true",
        help="JSON by a schema (response_format) and required tool calls, one request at a "
        "time: schema validity, valid tool calls, wall time, decode tok/s, and from Reame's "
        "/metrics tokens a step, forced share and mask cost; against --url servers, and/or "
        "(with no --url, or a MODEL) Reame started twice, forced runs off and on",
    )
    g.add_argument(
        "--items",
        type=int,
        default=12,
        help="--structured: requests a workload and target (default 12)",
    )


def bench(args: argparse.Namespace, log: Callable[[str], None]) -> int:
    from reame_bench import structured_report
    from reame_bench.load_target import ServeOptions
    from reame_bench.structured_runner import (
        FORCED_OFF,
        FORCED_ON,
        StructuredTarget,
        bench_structured,
    )
    from reame_bench.targets import target_names

    given = [f"--{m.replace('_', '-')}" for m in _OTHER_MODES if getattr(args, m, False)]
    if given:
        raise ConfigError(f"--structured is a bench of its own: drop {', '.join(given)}")
    if args.items < 1:
        raise ConfigError("--items must be at least 1")
    names = target_names(args.url, args.name, in_process=False)
    start = not args.url or args.model is not None
    if start and {FORCED_OFF, FORCED_ON} & set(names):
        raise ConfigError(f"{FORCED_OFF} and {FORCED_ON} name the started servers: use --name")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    targets: list[StructuredTarget] = []
    try:
        if start:
            for name, forced in ((FORCED_OFF, "false"), (FORCED_ON, "true")):
                log(f"starting reame serve with forced runs {forced}")
                options = ServeOptions(
                    args.model,
                    args.threads,
                    args.context_length or STARTED_CONTEXT,
                    args.batch_size,
                    args.parallel or STARTED_PARALLEL,
                    args.models_dir,
                    args.config,
                    extra={"forced_runs": forced},
                )
                targets.append(StructuredTarget.start(name, options))
        for url, name in zip(args.url, names, strict=True):
            targets.append(StructuredTarget.open(url, name, args.api_key))
        header, figures = bench_structured(targets, args.items, seed, log)
    finally:
        for target in targets:
            target.close()
    report = structured_report.as_json if args.json else structured_report.as_table
    print(report(header, figures))
    return 0
