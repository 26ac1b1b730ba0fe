"""What a stored KV state was computed by: the model file and the KV layout of the context."""

from __future__ import annotations

import hashlib
from pathlib import Path

from reame.cache.file_digest import cached_digest


def model_fingerprint(path: Path, cache_dir: Path | None = None) -> str:
    """Changes with any byte of the GGUF file: a hash of all of it (an edited model of the same
    size must never meet a state of the old one). With `cache_dir` (the state directory) the
    hash is remembered there, keyed by the file's stat, so a restart does not read it again."""
    h = hashlib.blake2b(digest_size=16)
    h.update(str(path.stat().st_size).encode())
    h.update(cached_digest(path, cache_dir).encode())
    return h.hexdigest()


def cache_fingerprint(model_path: Path, kv_layout: str, cache_dir: Path | None = None) -> str:
    h = hashlib.blake2b(digest_size=12)
    h.update(model_fingerprint(model_path, cache_dir).encode())
    h.update(kv_layout.encode())
    return h.hexdigest()
