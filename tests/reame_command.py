"""Run the real `reame` command in a child process, free of the caller's REAME_* settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def reame_command(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REAME_")}
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "app")
    return subprocess.run(
        [sys.executable, "-m", "reame.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
