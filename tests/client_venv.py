"""A virtual environment holding one real client from the package index, unmodified, for a
client whose pins clash with the test environment's (instructor 1.17 pins jiter below 0.15,
which openai 3.63 needs; the Agents SDK upgrades websockets under Sanic). Made once per
requirement set, under the temp directory, and kept for the next run; a client script runs in
it against a real server and prints what it saw as JSON."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CLIENTS = Path(__file__).parent / "clients"
_ROOT = Path(tempfile.gettempdir()) / "reame-client-venvs"


def client_venv(*requirements: str) -> Path:
    """The environment's python, made first if need be (pip from the configured index)."""
    digest = hashlib.sha256("\n".join((sys.version, *requirements)).encode()).hexdigest()[:16]
    home = _ROOT / digest
    python = home / "bin" / "python"
    if (home / ".ready").exists():
        return python
    shutil.rmtree(home, ignore_errors=True)
    home.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements],
        check=True,
        timeout=900,
    )
    (home / ".ready").touch()
    return python


def run_client(python: Path, script: str, *args: str, timeout: float = 600) -> dict:
    """Run tests/clients/`script` with `args`; what its last line of output says, as JSON."""
    done = subprocess.run(
        [str(python), str(CLIENTS / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])
