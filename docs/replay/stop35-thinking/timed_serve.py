"""Time each llama_decode (and state load/save) of a real `reame serve`: run this in place of
`reame serve`, with the same arguments; the times go to steps.log in the working directory."""

import sys
import time

import reame.llama.context as llama
from reame.cli.main import main

LOG = open("steps.log", "w", buffering=1)  # noqa: SIM115 - open for the process's whole life


def timed(name: str) -> None:
    original = getattr(llama.Context, name)

    def call(self, *args, **kwargs):
        started = time.perf_counter()
        out = original(self, *args, **kwargs)
        took = 1000 * (time.perf_counter() - started)
        size = len(args[0]) if name == "decode" else ""
        seqs = sorted(set(args[2])) if name == "decode" else (args[0] if args else "")
        LOG.write(f"{started:.4f} {name} {size} seqs={seqs} {took:.1f}ms\n")
        return out

    setattr(llama.Context, name, call)


for method in ("decode", "load_state", "save_state", "copy", "remove", "checkpoint", "rollback"):
    timed(method)
sys.exit(main(sys.argv[1:]))
