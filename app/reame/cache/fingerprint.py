"""What a stored KV state was computed by: the model file and the KV layout of the context."""

from __future__ import annotations

import hashlib
from pathlib import Path

_SAMPLE_BYTES = 4 << 20


def model_fingerprint(path: Path) -> str:
    """Changes with the GGUF file: its size and its first and last 4 MiB (the header, the
    metadata and the start and end of the weights) without reading gigabytes at start."""
    h = hashlib.blake2b(digest_size=16)
    size = path.stat().st_size
    h.update(str(size).encode())
    with path.open("rb") as f:
        h.update(f.read(_SAMPLE_BYTES))
        f.seek(max(0, size - _SAMPLE_BYTES))
        h.update(f.read(_SAMPLE_BYTES))
    return h.hexdigest()


def cache_fingerprint(model_path: Path, kv_layout: str) -> str:
    h = hashlib.blake2b(digest_size=12)
    h.update(model_fingerprint(model_path).encode())
    h.update(kv_layout.encode())
    return h.hexdigest()
