"""What `reame serve` checks before it loads anything: the directories it must write to."""

from __future__ import annotations

import tempfile
from pathlib import Path

from reame.config import Settings


def state_problem(settings: Settings) -> str | None:
    """Why the stores that should persist cannot be written (a read-only volume, a wrong owner),
    or None. Reame still serves, from RAM, so it is a reason to report, not to stop."""
    wanted: dict[str, Path] = {}
    if settings.prefix_cache and settings.prefix_cache_disk:
        wanted["prefix cache"] = settings.prefix_cache_path
    if settings.palimpsest:
        wanted["Palimpsest"] = settings.palimpsest_path
    if settings.answer_memory:
        wanted["answer memory"] = settings.answers_path
    failed = {
        name: (directory, why) for name, directory in wanted.items() if (why := _refusal(directory))
    }
    if not failed:
        return None
    where = ", ".join(f"{directory} ({why})" for directory, why in failed.values())
    *first, last = [f"the {name}" for name in failed]
    stores = f"{', '.join(first)} and {last}" if first else last
    return (
        f"cannot write {where}: {stores} will not persist across restarts; "
        "mount the state volume read-write, owned by the user Reame runs as"
    )


def _refusal(directory: Path) -> str | None:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-check-"):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)
