"""reame with every reuse decision traced to stderr (REUSE common=... -> length): how the
chunk-end case was found. Usage: python3 trace_reuse.py serve MODEL [flags]."""

import sys

import reame.engine.exact_reuse as rule
import reame.engine.reuse_index as index
from reame.cli.main import main

decided = rule.reuse_length


def traced(common, held, session, cold_cuts, own_cuts, num_prompt, budget, granule=1):
    out = decided(common, held, session, cold_cuts, own_cuts, num_prompt, budget, granule)
    print(
        f"REUSE common={common} held_prompt={held.prompt_length} held_len={len(held.tokens)}",
        f"ends={list(held.known_ends)} chunks={list(held.chunks)} cold={list(cold_cuts)}",
        f"own={list(own_cuts)} n={num_prompt} -> {out}",
        file=sys.stderr,
        flush=True,
    )
    return out


index.reuse_length = traced
sys.exit(main(sys.argv[1:]))
