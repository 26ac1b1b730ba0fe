"""`reame bench --replay`: realistic traces replayed against a `reame serve` it starts and a peer
(llama-server it starts from --llama-server, or a running --url), by one client and by a few
users, straight through and across a restart; report.md, the plots and per_request.json."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from reame.config import Settings
from reame.errors import ConfigError
from reame_bench.cli.settings import bench_settings, progress

PARALLEL, CONTEXT = 4, 4096
REAME = "reame"
# the bench families that are not this one: a flag of theirs with --replay is a mistake
OTHER_FAMILIES = ("step_costs", "structured", "cluster", "load", "soak", "prefix", "spec",
                  "structure", "conclave", "after_restart", "in_process", "build_only")  # fmt: skip


def check_args(args: argparse.Namespace) -> list[str]:
    """The traces asked for; a ConfigError of one line for a bad flag."""
    from reame_bench.replay_traces import TRACES

    others = [f"--{f.replace('_', '-')}" for f in OTHER_FAMILIES if getattr(args, f, False)]
    if others:
        raise ConfigError(f"--replay is a bench of its own: leave out {', '.join(others)}")
    names = [t.strip() for t in args.traces.split(",") if t.strip()]
    unknown = [t for t in names if t not in TRACES]
    if unknown or not names:
        raise ConfigError(f"--traces takes {','.join(TRACES)}, not {args.traces!r}")
    if args.requests < 2:
        raise ConfigError("--requests takes 2 or more (a restart goes half-way)")
    if min(args.users, args.max_tokens, args.system_words) < 1:
        raise ConfigError("--users, --max-tokens and --system-words take 1 or more")
    if args.llama_server and args.url:
        raise ConfigError("give the peer as --llama-server PATH (started here) or --url, not both")
    if len(args.url) > 1 or len(args.name) > len(args.url):
        raise ConfigError("--replay takes one peer: at most one --url (and one --name)")
    if args.llama_server and not args.llama_server.is_file():
        raise ConfigError(f"--llama-server {args.llama_server}: no such file")
    return list(dict.fromkeys(names))


def thinking_settings(settings: Settings) -> tuple[dict[str, str], list[str]]:
    """Reame's settings and llama-server's flags for the template file and thought budget
    given (`--chat-template-file`, REAME_REASONING_BUDGET): the peer separates thoughts as
    Reame does (`--reasoning-format deepseek`)."""
    reame: dict[str, str] = {}
    peer: list[str] = []
    if settings.chat_template_file is not None:
        path = str(settings.chat_template_file.resolve())
        reame["chat_template_file"] = path
        peer += ["--chat-template-file", path, "--reasoning-format", "deepseek"]
    if settings.reasoning_budget is not None:
        reame["reasoning_budget"] = str(settings.reasoning_budget)
        peer += ["--reasoning-budget", str(settings.reasoning_budget)]
    return reame, peer


def bench_replay(args: argparse.Namespace) -> int:
    from reame.autotune import usable_cores
    from reame.runtime import model_file
    from reame_bench import replay_plot
    from reame_bench import replay_report as report
    from reame_bench.load_target import ServeOptions, serve_args
    from reame_bench.replay_runner import replay_all
    from reame_bench.replay_servers import (
        Launcher,
        LlamaServer,
        ReameServer,
        RunningServer,
        llama_server_command,
    )
    from reame_bench.replay_traces import build_trace
    from reame_bench.targets import default_name

    names = check_args(args)
    parallel = args.parallel or PARALLEL
    context = args.context_length or CONTEXT
    threads = args.threads or usable_cores()[0]
    settings = bench_settings(args)
    gguf = model_file(settings)  # NOTE: the file the peer loads too
    model = str(gguf) if args.synthetic else args.model
    options = ServeOptions(model, threads, context, args.batch_size, parallel, args.models_dir,
                           args.config)  # fmt: skip
    reame_args = serve_args(options, parallel, context)
    # NOTE: the same template and thought budget for both servers (a model that thinks)
    reame_thinking, peer_thinking = thinking_settings(settings)
    launchers = [
        Launcher(REAME, f"reame serve {' '.join(reame_args)} (a new state directory a run)",
                 lambda: ReameServer(reame_args, reame_thinking))
    ]  # fmt: skip
    if args.llama_server:
        command = llama_server_command(args.llama_server.resolve(), gguf, threads, parallel,
                                       context) + peer_thinking  # fmt: skip
        launchers.append(Launcher("llama-server", " ".join(command), lambda: LlamaServer(command)))
    elif args.url:
        url = args.url[0]
        peer = args.name[0] if args.name else default_name(url)
        if peer == REAME:
            raise ConfigError(f"--name {REAME} is the started server's: give the peer another")
        running = Launcher(peer, f"{url} (running)", lambda: RunningServer(url), fresh=False,
                           restartable=False, api_key=args.api_key)  # fmt: skip
        launchers.append(running)
    seed = args.seed if args.seed is not None else 0
    traces = [build_trace(n, args.requests, parallel, args.system_words, seed) for n in names]
    run_modes = report.modes(args.requests, args.users)
    header = {
        "model": f"{settings.model if not args.synthetic else args.synthetic} ({gguf})",
        "settings": f"{threads} threads, {parallel} sequences (slots) of {context} tokens",
        "servers": "; ".join(f"{x.name}: {x.detail}" for x in launchers),
        "requests": f"{args.requests} a trace, at most {args.max_tokens} tokens an answer, "
        f"greedy, streamed; seed {seed}",
        "runs": "; ".join(m.label for m in run_modes)
        + ", each on servers started for it, one server at a time",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    records, notes = replay_all(traces, launchers, run_modes, args.max_tokens, progress)
    servers = [x.name for x in launchers]
    figs = report.figures(records, args.requests, run_modes)
    summaries = {t.name: t.summary for t in traces}
    out = args.out or Path(f"replay-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    data = report.as_json(header, summaries, figs, records)
    (out / "per_request.json").write_text(data)
    plots = {f"{t.name} cost": f"{t.name}_cost.png" for t in traces}
    if "rag_overlap" in figs:
        plots["rag overlap"] = "rag_overlap.png"
    md = report.markdown(header, summaries, figs, servers, run_modes, args.requests, plots, notes)
    (out / "report.md").write_text(md)
    for t in traces:
        trace_records = [r for r in records if r.trace == t.name]
        replay_plot.cost_png(
            t.name, trace_records, servers, run_modes, out / plots[f"{t.name} cost"]
        )
    if "rag_overlap" in figs:
        replay_plot.overlap_png(figs["rag_overlap"], servers, out / plots["rag overlap"])
    print(data if args.json else md)
    progress(f"replay: written to {out}: report.md, per_request.json, {', '.join(plots.values())}")
    failed = sum(1 for r in records if r.error)
    if failed:
        print(f"reame bench --replay: {failed} requests failed", file=sys.stderr)
    return 1 if failed else 0
