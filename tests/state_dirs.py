"""Throwaway state directories for tests (never the user's cache), all under one root that is
removed when the test process exits."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

_ROOT = Path(tempfile.mkdtemp(prefix="reame-tests-"))
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)


def new_state_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="state-", dir=_ROOT))
