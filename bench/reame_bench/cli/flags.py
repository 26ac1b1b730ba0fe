"""`reame bench`'s flags, every bench family's, in the groups and order `--help` lists them.

NOTE: one module, not one per family: the help groups cut across the families (--structure and
--conclave, run in process, are listed among the prefix cache workloads).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from reame.cli.common import add_settings_flags
from reame_bench.cli import again, exam, structured
from reame_bench.synthetic_shapes import SHAPES


def add_flags(p: argparse.ArgumentParser) -> None:
    add_settings_flags(p, with_spec_mode=False)
    p.add_argument(
        "--synthetic",
        metavar="SHAPE",
        help="build (once) and bench a random-weight GGUF with a real model's shapes: "
        f"{', '.join(SHAPES)}",
    )
    p.add_argument(
        "--step-costs",
        action="store_true",
        help="what a verify batch of k tokens and a step of S sequences cost, as multiples of "
        "a one-token step (where drafts are cheap: a memory-bound model)",
    )
    p.add_argument(
        "--build-only",
        action="store_true",
        help="with --synthetic: build the model, print its path on the last line, and stop",
    )
    p.add_argument("--runs", type=int, default=3, help="repetitions; medians are reported")
    p.add_argument("--prompt-tokens", type=int, default=512, help="prompt length for prefill")
    p.add_argument(
        "--max-tokens", type=int, help="tokens generated per request (default 128; --replay 32)"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    h = p.add_argument_group("servers (OpenAI-compatible: a running Reame, llama-server, Ollama)")
    h.add_argument(
        "--url",
        action="append",
        default=[],
        help="bench this server instead of the plain loop; repeat to compare servers side by side, "
        "with ratios against the first; they should serve the same model, threads and slots",
    )
    h.add_argument("--api-key", metavar="KEY", help="bearer token sent to every --url")
    h.add_argument(
        "--seed",
        type=int,
        help="prompt seed, to send the prompts of an earlier run again (default: new prompts, "
        "so that no server's prompt cache has seen them)",
    )
    h.add_argument(
        "--name",
        action="append",
        default=[],
        help="a name for each --url, in order (default: its host:port)",
    )
    h.add_argument(
        "--in-process",
        action="store_true",
        help="with --url: also run the workloads on Reame's engine in this process (model and "
        "settings as given here), as the first target, so the ratios read HTTP over in-process",
    )
    c = p.add_argument_group("prefix cache workloads")
    c.add_argument(
        "--prefix",
        action="store_true",
        help="time to first token behind a shared 1.5k-word system prompt (cold, warm, after a "
        "restart), per turn of a conversation, and against the share of a 2k-word prefix; "
        "in process (Reame restarted on its own cache directory) and/or against --url servers",
    )
    c.add_argument(
        "--spec",
        action="store_true",
        help="decode speed with speculation off, on and auto: repeated and reworded requests "
        "(also after a restart), adversarial ones, 4 concurrent streams; in process (on an "
        "archive of its own) and/or against --url servers",
    )
    c.add_argument(
        "--structure",
        action="store_true",
        help="decode speed with Il Suggeritore on and off (and no speculation) on fresh lists, "
        "tables, JSON arrays and prose; greedy outputs compared; in process",
    )
    c.add_argument(
        "--completions",
        action="store_true",
        help="with --spec: text completions instead of chats (for a base model such as "
        "gemma3-270m, which has no chat template)",
    )
    c.add_argument(
        "--conclave",
        action="store_true",
        help="a quiz: one greedy answer, 5 sampled answers in turn, and a Conclave of 5 (with "
        "and without its early stop): wall time, tokens and accuracy; in process",
    )
    c.add_argument(
        "--after-restart",
        action="store_true",
        help="with --prefix --url: the servers were just restarted; time their first request",
    )
    ld = p.add_argument_group(
        "load and soak: a real `reame serve` started on 127.0.0.1, or one --url on this machine"
    )
    ld.add_argument(
        "--load",
        action="store_true",
        help="many clients at once (a seeded mix of chats, streams, dropped streams, Conclaves, "
        "sessions, oversize and malformed requests): statuses, latency, 5xx, 429s with "
        "Retry-After, slots freed after; exits 1 when a check fails",
    )
    ld.add_argument(
        "--soak",
        action="store_true",
        help="a few clients with think time for --minutes, sampling the server's RSS, file "
        "descriptors, threads and store sizes into a CSV and a PNG; exits 1 on any 5xx",
    )
    ld.add_argument("--clients", type=int, help="concurrent clients (default 64; --soak 4)")
    ld.add_argument(
        "--requests",
        type=int,
        help="--load: requests at most (default 2000); --replay: a trace's requests (default 100)",
    )
    ld.add_argument(
        "--seconds", type=float, default=90.0, help="--load: seconds at most; --hostile: a phase's"
    )
    ld.add_argument("--max-waiting", type=int, default=8, help="the started server's queue")
    ld.add_argument("--minutes", type=float, default=30.0, help="--soak: how long")
    ld.add_argument("--interval", type=float, default=60.0, help="--soak: seconds a sample")
    ld.add_argument(
        "--out",
        type=Path,
        help="--soak: where soak.csv and soak.png go; --replay: where report.md, the plots and "
        "per_request.json go (default ./replay-DATE-TIME)",
    )
    hs = p.add_argument_group(
        "hostile client: a `reame serve` started on 127.0.0.1 with a victim's key and an "
        "attacker's (sizes of the attacks)"
    )
    hs.add_argument(
        "--hostile",
        action="store_true",
        help="a victim's short chats (--clients, default 2) for --seconds with the attacker's "
        "process idle beside them, then for --seconds more while it attacks: huge prompt lists, "
        "streams never read, slow senders, idle connections, a flood from its key; the victim's "
        "latency ratio, /health, RSS, 5xx and every attacker outcome; exits 1 when a check fails",
    )
    hs.add_argument(
        "--attacks",
        default="prompts,stalled,slow,idle,flood",
        help="which attacks (comma-separated; default all)",
    )
    hs.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="quiet then hostile, this many times, each phase --seconds (on a shared machine, "
        "alternating spreads others' load over both)",
    )
    hs.add_argument("--prompt-list", type=int, default=100_000, help="prompts in a huge list")
    hs.add_argument("--flood", type=int, default=12, help="the flood's requests at once")
    hs.add_argument("--stalled", type=int, default=16, help="streams never read, at once")
    hs.add_argument("--slow", type=int, default=16, help="slow senders at once")
    hs.add_argument("--idle", type=int, default=300, help="idle connections held open")
    hs.add_argument(
        "--client-timeout",
        type=float,
        default=5.0,
        help="the started server's client_timeout_seconds",
    )
    cl = p.add_argument_group(
        "cluster: replicas of `reame serve`, a redis-server and HAProxy started on 127.0.0.1"
    )
    cl.add_argument(
        "--cluster",
        action="store_true",
        help="(a) a replica that never saw a 1.5k-token system prompt: time to first token "
        "cold, from the shared tier, its disk and its RAM, per stage; (b) a multi-user chat "
        "workload on 2 replicas routed round robin, by route key and by body, with and without "
        "the shared tier; (c) a replica replaced by an empty one mid-run",
    )
    cl.add_argument(
        "--cluster-parts",
        default="stages,routing,replacement",
        help="which of stages, routing, replacement to run (comma-separated; default all)",
    )
    cl.add_argument("--conversations", type=int, default=16, help="(b), (c): conversations")
    cl.add_argument("--system-prompts", type=int, default=4, help="(b), (c): behind them")
    cl.add_argument("--turns", type=int, default=4, help="(b), (c): turns a conversation")
    cl.add_argument(
        "--system-words",
        type=int,
        help="(b), (c): words of each system prompt (default 600); --replay: of what a trace's "
        "requests share, the system prompt or rag's passages (default 400)",
    )
    cl.add_argument(
        "--haproxy-config",
        type=Path,
        help="the HAProxy config to run (default: the checkout's docker/haproxy/haproxy.cfg)",
    )
    cl.add_argument(
        "--project-prefill-tps",
        type=float,
        help="(a) projected to --project-to: that model's measured prefill rate (tokens/s), "
        "e.g. from `reame bench --prefix --synthetic qwen2.5-7b`",
    )
    cl.add_argument(
        "--project-warm-s",
        type=float,
        help="with --project-prefill-tps: that model's measured warm time to first token (its "
        "prefix in its slot), what a hit leaves to compute (default: the tail at the prefill rate)",
    )
    cl.add_argument(
        "--project-to", default="qwen2.5-7b", help="catalog model the projection is for"
    )
    cl.add_argument(
        "--project-link-gbps",
        type=float,
        default=1.0,
        help="the projection's network link to the shared tier, in Gbit/s",
    )
    rp = p.add_argument_group(
        "replay: realistic traces against a `reame serve` and a peer started on 127.0.0.1"
    )
    rp.add_argument(
        "--replay",
        action="store_true",
        help="replays traces (a multi-turn chat behind a shared system prompt, an agent loop "
        "with tools, extraction by a JSON schema, RAG with overlapping passages) against Reame "
        "and a peer, by one client and by --users, straight through and restarted half-way: "
        "the cost of the last requests over the first, per request index, as report.md, PNG "
        "plots and per_request.json in --out",
    )
    rp.add_argument(
        "--traces", default="chat,agent,extract,rag", help="which traces (comma-separated)"
    )
    rp.add_argument(
        "--users", type=int, default=3, help="users at once in the concurrent runs (1: none)"
    )
    rp.add_argument(
        "--llama-server",
        type=Path,
        metavar="PATH",
        help="the peer: this llama-server binary, started on the same GGUF, threads and slots "
        "(or give a running peer as --url, which is not restarted)",
    )
    structured.add_flags(p)
    exam.add_flags(p)
    again.add_flags(p)
