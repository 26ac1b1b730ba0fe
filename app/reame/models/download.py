"""Fetch GGUF files from the Hugging Face hub (or a mirror) into models_dir, and prove them.

huggingface_hub (2.x) writes each download to a uniquely named `*.incomplete` file under
`<models_dir>/.cache/huggingface/download/` and renames it into place only once every byte has
arrived, so a file at the final path is never a partial download. Within one call a dropped
connection is resumed with a Range request from the last whole 10 MB piece written; a call
that fails deletes its partial file, so the next call starts over.

A verified file gets a marker next to it (`<file>.sha256`, readable by `sha256sum -c`) holding
its checksum, size and mtime: later starts trust an unchanged file without re-hashing gigabytes.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import structlog
from huggingface_hub import constants as hf_constants
from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import silent_tqdm

from reame.errors import DownloadError, ModelLoadError
from reame.models.catalog import CatalogEntry
from reame.models.gguf_facts import check_magic

log = structlog.get_logger("reame.models")

MARKER_SUFFIX = ".sha256"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_MARKER_STAT = re.compile(r"#\s*size=(\d+)\s+mtime_ns=(\d+)")
_MAX_REASON_CHARS = 240


def _network_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [HfHubHTTPError, EntryNotFoundError, OSError, ValueError]
    # huggingface_hub's HTTP client changed across majors (requests, httpx, httpx2); requests'
    # errors are OSErrors, the httpx ones are not.
    for name in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(name).HTTPError)
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


_NETWORK_ERRORS = _network_errors()


@dataclass(frozen=True, slots=True)
class _Marker:
    sha256: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class _Source:
    repo: str
    filename: str
    url: str
    target: Path


def download(
    entry: CatalogEntry,
    models_dir: Path,
    endpoint: str | None = None,
    show_progress: bool = True,
) -> Path:
    """Download every file of `entry` into models_dir; return the one llama.cpp opens."""
    first = download_file(
        entry.hf_repo,
        entry.hf_file,
        models_dir,
        expected_sha256=entry.sha256,
        endpoint=endpoint,
        show_progress=show_progress,
    )
    for extra in entry.hf_extra_files:
        download_file(
            entry.hf_repo, extra, models_dir, endpoint=endpoint, show_progress=show_progress
        )
    return first


def download_file(
    repo: str,
    filename: str,
    models_dir: Path,
    *,
    expected_sha256: str | None = None,
    endpoint: str | None = None,
    show_progress: bool = True,
) -> Path:
    """Download `filename` of hub repo `repo` to `models_dir/filename` and verify it.

    The checksum checked is `expected_sha256` when given, else the hub's own (the LFS sha256 it
    sends as ETag). A file already there that passes is returned without downloading again.
    """
    target = models_dir / filename
    if expected_sha256 is not None and target.exists():
        if verified(target, expected_sha256):
            return target  # pinned and proven: no need to ask the hub
        # huggingface_hub would trust its own bookkeeping and hand this damaged file back
        remove_model_file(target)
    source = _Source(repo, filename, hf_hub_url(repo, filename, endpoint=endpoint), target)
    expected = expected_sha256 or _hub_sha256(source)
    if target.exists():
        if verified(target, expected):
            return target
        remove_model_file(target)
    _fetch(source, models_dir, endpoint, show_progress)
    _check_download(source, expected)
    return target


def verified(path: Path, expected_sha256: str | None) -> bool:
    """True if `path` is a GGUF file whose sha256 is the expected one.

    With no expected checksum, the one a marker recorded at download time is used; with
    neither, only the GGUF magic is checked. A matching marker spares re-hashing the file.
    """
    if not path.is_file():
        return False
    try:
        check_magic(path)
    except ModelLoadError:
        return False
    return checksum_matches(path, expected_sha256)


def checksum_matches(path: Path, expected_sha256: str | None) -> bool:
    marker = read_marker(path)
    expected = expected_sha256 or (marker.sha256 if marker is not None else None)
    if expected is None:
        return True
    stat = path.stat()
    if marker == _Marker(expected, stat.st_size, stat.st_mtime_ns):
        return True
    if sha256_file(path) != expected:
        return False
    write_marker(path, expected)
    return True


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def marker_path(path: Path) -> Path:
    return path.with_name(path.name + MARKER_SUFFIX)


def read_marker(path: Path) -> _Marker | None:
    try:
        lines = marker_path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if len(lines) < 2:
        return None
    sha256 = lines[0].split(maxsplit=1)[0] if lines[0].strip() else ""
    stat = _MARKER_STAT.match(lines[1])
    if not _SHA256_HEX.fullmatch(sha256) or stat is None:
        return None
    return _Marker(sha256, int(stat.group(1)), int(stat.group(2)))


def write_marker(path: Path, sha256: str) -> None:
    stat = path.stat()
    text = (
        f"{sha256}  {path.name}\n"
        f"# size={stat.st_size} mtime_ns={stat.st_mtime_ns} "
        "(reame checked the file against this sha256; delete this marker to re-check)\n"
    )
    marker = marker_path(path)
    tmp = marker.with_name(f".{marker.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, marker)
    except OSError:
        tmp.unlink(missing_ok=True)  # the marker is only a cache: without it we hash again


def remove_model_file(path: Path) -> None:
    marker_path(path).unlink(missing_ok=True)
    path.unlink(missing_ok=True)


def _hub_sha256(source: _Source) -> str | None:
    # Also a fast reachability probe: hf_hub_download alone would back off and retry an
    # unreachable endpoint for about half a minute before failing.
    try:
        metadata = get_hf_file_metadata(source.url)
    except _NETWORK_ERRORS as exc:
        raise _download_error(source, exc) from exc
    etag = (metadata.etag or "").lower()
    return etag if _SHA256_HEX.fullmatch(etag) else None


def _fetch(source: _Source, models_dir: Path, endpoint: str | None, show_progress: bool) -> None:
    log.info("model_download", repo=source.repo, file=source.filename, url=source.url)
    try:
        hf_hub_download(
            repo_id=source.repo,
            filename=source.filename,
            local_dir=models_dir,
            endpoint=endpoint,
            # With local_dir, huggingface_hub copies a file found in the shared HF cache straight
            # to the final path, so an interrupted copy would leave a partial file there. A cache
            # dir that does not exist keeps every write on the .incomplete-then-rename path.
            cache_dir=models_dir / ".cache" / "reame" / "no-shared-hf-cache",
            tqdm_class=None if show_progress else silent_tqdm,
        )
    except _NETWORK_ERRORS as exc:
        raise _download_error(source, exc) from exc


def _check_download(source: _Source, expected: str | None) -> None:
    target = source.target
    try:
        check_magic(target)
    except ModelLoadError as exc:
        remove_model_file(target)
        raise DownloadError(
            f"{source.url} sent a file that is not GGUF, so it was deleted; check that "
            f"hub_endpoint is a Hugging Face hub or mirror, or put the file at {target}"
        ) from exc
    if expected is None:
        log.warning("model_unverified", file=str(target), reason="the hub sent no sha256")
        return
    actual = sha256_file(target)
    if actual != expected:
        remove_model_file(target)
        raise DownloadError(
            f"{source.url} sent {source.filename} with sha256 {actual}, expected {expected}, so "
            "it was deleted; download it again, and if it repeats use another hub_endpoint "
            f"or put a good copy at {target}"
        )
    write_marker(target, actual)
    log.info("model_verified", file=str(target), sha256=actual)


def _download_error(source: _Source, exc: BaseException) -> DownloadError:
    return DownloadError(
        f"cannot download {source.filename} of {source.repo} from {source.url}: "
        f"{_reason(exc)}; {_fix(exc, source.target)}"
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OfflineModeIsEnabled):
        return "huggingface_hub offline mode is on (HF_HUB_OFFLINE)"
    if isinstance(exc, RemoteEntryNotFoundError):
        return "the repository has no such file"
    if isinstance(exc, RepositoryNotFoundError):  # also gated repositories
        return "the repository does not exist, is private or is gated"
    if isinstance(exc, RevisionNotFoundError):
        return "the revision does not exist"
    response = getattr(exc, "response", None) if isinstance(exc, HfHubHTTPError) else None
    if response is not None:
        return f"the server answered HTTP {response.status_code}"
    cause = exc.__cause__ if isinstance(exc, LocalEntryNotFoundError) and exc.__cause__ else exc
    text = " ".join(str(cause).split())
    text = text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…"
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


def _fix(exc: BaseException, target: Path) -> str:
    if isinstance(exc, OfflineModeIsEnabled):
        return f"unset HF_HUB_OFFLINE, or put the file at {target}"
    if isinstance(exc, RemoteEntryNotFoundError | RepositoryNotFoundError | RevisionNotFoundError):
        return f"check that hub_endpoint serves this repository, or put the file at {target}"
    endpoint = hf_constants.ENDPOINT
    return (
        f"check the network and retry, set hub_endpoint to a reachable mirror (the default is "
        f"{endpoint}), or put the file at {target}"
    )
