"""Files and directories under the state directory, readable by their owner only: KV states and
earlier answers are the users' prompts and replies."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def make_dirs(path: Path) -> None:
    """mkdir -p where every directory it creates is 0700 (Path.mkdir gives parents the default
    mode, whatever `mode` says)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)


def make_private(path: Path) -> None:
    """A directory made before this rule (or by someone else's mkdir): ours again."""
    with contextlib.suppress(OSError):
        if path.is_dir() and path.stat().st_uid == os.getuid():
            os.chmod(path, DIR_MODE)


def open_append(path: Path) -> int:
    """A file descriptor to append to, the file created 0600 if it is new."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)


def write_atomic(
    path: Path, data: bytes, tmp_dir: Path | None = None, suffix: str = ".part"
) -> None:
    """Temp file (0600, as mkstemp makes it), fsync, rename, fsync of the directory: a reader
    sees the old file or the new one, never a part, and after a crash the rename is there.
    Raises OSError."""
    fd, tmp = tempfile.mkstemp(dir=tmp_dir or path.parent, suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def fsync_directory(directory: Path) -> None:
    """A rename is durable once its directory is: fsync it too (POSIX; a no-op elsewhere)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
