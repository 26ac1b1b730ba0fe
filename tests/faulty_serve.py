"""`reame serve` with one fault put into the engine thread, for the tests of what the server does
when that thread dies (a bug, a MemoryError outside a step): run as `python faulty_serve.py
serve ARGS...`, as `reame` is run. Applying an admission raises for the first
request whose prompt holds the word DIE; everything else is the real server."""

from __future__ import annotations

import sys

from reame.cli.main import main
from reame.engine.scheduler import Admission
from reame.engine.update import Update

MARK = "DIE"


def install() -> None:
    admitted = Update.admitted

    def failing_admitted(self: Update, admission: Admission) -> None:
        for seq in admission.admitted:
            text = b"".join(self.model.piece(t) for t in seq.request.prompt)
            if MARK.encode() in text:
                raise MemoryError("injected fault in the engine thread")
        admitted(self, admission)

    Update.admitted = failing_admitted  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(main(sys.argv[1:]))
