"""What a stored KV state was computed by: the model file, the llama.cpp build, the CPU backend
and the KV layout of the context. States move only where all four match: an x86 and an ARM
replica of one model must not share, since their kernels round differently."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reame.cache.file_digest import cached_digest

PARTS = ("model", "build", "backend", "kv_layout")


@dataclass(slots=True, frozen=True)
class Fingerprint:
    """`key` names the directory on disk and goes in every snapshot's header; `parts` say, of
    a state that does not match, which of the four differs (a metric's reason)."""

    key: str
    parts: dict[str, str]

    def first_difference(self, other: object) -> str:
        """The first part that differs from another header's parts; "fingerprint" if those
        are not readable."""
        if not isinstance(other, dict):
            return "fingerprint"
        return next((p for p in PARTS if other.get(p) != self.parts.get(p)), "fingerprint")


def model_fingerprint(path: Path, cache_dir: Path | None = None) -> str:
    """Changes with any byte of the GGUF file: a hash of all of it (an edited model of the same
    size must never meet a state of the old one). With `cache_dir` (the state directory) the
    hash is remembered there, keyed by the file's stat, so a restart does not read it again."""
    h = hashlib.blake2b(digest_size=16)
    h.update(str(path.stat().st_size).encode())
    h.update(cached_digest(path, cache_dir).encode())
    return h.hexdigest()


def build_fingerprint(version: str, libraries: Iterable[Path], cache_dir: Path | None) -> str:
    """llama-cpp-python's version and a hash of every native library it loads from."""
    h = hashlib.blake2b(version.encode(), digest_size=12)
    for lib in sorted(libraries):
        h.update(lib.name.encode() + cached_digest(lib, cache_dir).encode())
    return h.hexdigest()


def cache_fingerprint(
    model_path: Path,
    kv_layout: str,
    cache_dir: Path | None = None,
    build: str = "",
    backend: str = "",
) -> Fingerprint:
    parts = {
        "model": model_fingerprint(model_path, cache_dir),
        "build": build,
        "backend": hashlib.blake2b(backend.encode(), digest_size=8).hexdigest(),
        "kv_layout": kv_layout,
    }
    h = hashlib.blake2b(digest_size=12)
    for name in PARTS:
        h.update(parts[name].encode() + b"\0")
    return Fingerprint(h.hexdigest(), parts)
