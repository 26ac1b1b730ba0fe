"""`reame bench --cluster`: replicas of `reame serve`, a redis-server and HAProxy on this machine;
the per-tier stages of a prefix restore, the routing workload and a replica replaced."""

from __future__ import annotations

import argparse
import asyncio

from reame.errors import ConfigError
from reame_bench.cli.settings import progress

PARTS = ("stages", "routing", "replacement")
# NOTE: stages run one replica at a time (each the machine's, as on a VM of its own); the
# workload runs two at once on this machine's two cores, a thread each
STAGE_THREADS, WORKLOAD_THREADS = 2, 1
PARALLEL, CONTEXT = 2, 4096
ANSWER_TOKENS = 32


def bench_cluster(args: argparse.Namespace) -> int:
    from reame_bench import cluster_report as report
    from reame_bench.cluster_processes import SHIPPED_HAPROXY
    from reame_bench.cluster_routing import matrix, run_scenario
    from reame_bench.cluster_stages import bench_stages
    from reame_bench.cluster_workload import chat_workload
    from reame_bench.load_target import ServeOptions, serve_args

    parts = [p.strip() for p in args.cluster_parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ConfigError(f"--cluster-parts takes {', '.join(PARTS)}, not {','.join(unknown)}")
    counts = (args.runs, args.conversations, args.system_prompts, args.turns, args.system_words)
    if min(counts) < 1 or (args.clients is not None and args.clients < 1):
        raise ConfigError(
            "--runs, --conversations, --system-prompts, --turns, --system-words and --clients "
            "take 1 or more"
        )
    if any(v is not None and v <= 0 for v in (args.project_prefill_tps, args.project_warm_s)):
        raise ConfigError("--project-prefill-tps and --project-warm-s must be above 0")
    users = args.clients or 4
    haproxy_config = args.haproxy_config or SHIPPED_HAPROXY

    def replica_args(threads: int) -> list[str]:
        options = ServeOptions(
            args.model, args.threads or threads, args.context_length, args.batch_size,
            args.parallel, args.models_dir, args.config,
        )  # fmt: skip
        return serve_args(options, args.parallel or PARALLEL, args.context_length or CONTEXT)

    # NOTE: the shipped HAProxy config checks every 2 s, fall 2, as the cluster profile sets
    settings = {"max_waiting": "32", "drain_accept_seconds": "5"}
    header = {
        "replicas": f"reame serve {' '.join(replica_args(WORKLOAD_THREADS))} (workload); "
        f"--threads {args.threads or STAGE_THREADS} for the stages",
        "workload": f"{args.conversations} conversations of {args.turns} turns behind "
        f"{args.system_prompts} system prompts of {args.system_words} words, {users} users at "
        f"once, {ANSWER_TOKENS} tokens an answer, greedy",
        "runs": args.runs,
    }
    stages = None
    if "stages" in parts:
        stages = asyncio.run(
            bench_stages(
                replica_args(STAGE_THREADS),
                settings,
                args.runs,
                args.parallel or PARALLEL,
                progress,
            )
        )
    wanted = [
        s for s in matrix()
        if ("replacement" if s.replace_after is not None else "routing") in parts
    ]  # fmt: skip
    workload = chat_workload(
        args.system_prompts, args.conversations, args.turns, args.system_words, seed=args.seed or 0
    )
    scenarios: dict[str, list] = {}
    for _ in range(args.runs):
        for scenario in wanted:
            outcome = asyncio.run(
                run_scenario(
                    scenario, replica_args(WORKLOAD_THREADS), settings, workload, users,
                    ANSWER_TOKENS, progress, haproxy_config,
                )
            )  # fmt: skip
            scenarios.setdefault(scenario.name, []).append(outcome)
    projected = _projection(args, stages) if stages else None
    if args.json:
        print(report.as_json(header, stages, scenarios, projected))
        return 0
    print("\n".join(f"{k}: {v}" for k, v in header.items()))
    if stages:
        print("\n== (a) a replica that never saw the system prompt\n")
        print(report.stages_table(stages))
        if projected:
            link = f"a {args.project_link_gbps:g} Gbit/s link"
            print()
            print(report.projection_table(projected, args.project_to, link))
    if any(s.replace_after is None for s in wanted):
        print("\n== (b) the multi-user chat workload on 2 replicas\n")
        print(report.routing_table(scenarios))
    if any(s.replace_after is not None for s in wanted):
        print("\n== (c) a replica replaced by an empty one mid-run\n")
        print(report.replacement_table(scenarios))
    return 0


def _projection(args: argparse.Namespace, stages: dict) -> dict | None:
    from reame.models.catalog import CATALOG
    from reame_bench.cluster_projection import project
    from reame_bench.cluster_report import measured
    from reame_bench.cluster_stages import TIERS

    if args.project_prefill_tps is None:
        return None
    small = CATALOG.get(args.model or "smollm2-135m")
    big = CATALOG.get(args.project_to)
    if big is None or small is None or not small.kv_bytes_per_token:
        raise ConfigError(
            "--project-prefill-tps projects a catalog model's figures to another's: "
            f"{args.model or 'smollm2-135m'!r} and {args.project_to!r} must both be aliases"
        )
    ratio = big.kv_bytes_per_token / small.kv_bytes_per_token
    link = args.project_link_gbps * 1e9 / 8
    return {
        t: project(
            measured(stages[t]),
            ratio,
            args.project_prefill_tps,
            link,
            t == "shared",
            args.project_warm_s,
        )
        for t in TIERS
    }
