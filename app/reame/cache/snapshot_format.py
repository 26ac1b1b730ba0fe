"""One snapshot file: a prefix's KV state with what it was computed by. Pure.

    magic (8) | header length (4) | header JSON | token ids (int32) | blake2b-16 | zstd(state)

The header carries the format version, the fingerprint (model file, llama.cpp build, CPU
backend, KV layout) with its parts, the token count and the sizes. The blake2b checksum covers
every byte before it; the zstd frame carries its own checksum (XXH64) of the state, checked as
it decompresses. Together they cover the whole file, and reading a 30 MB state costs one fast
pass instead of a slow hash over all of it. Anything that does not check out raises
SnapshotError, which the cache counts as a miss.
"""

from __future__ import annotations

import hashlib
import json
from array import array

import zstandard

from reame.cache.fingerprint import Fingerprint
from reame.saved_state import SavedState

MAGIC = b"REAMEKV\x01"
FORMAT_VERSION = 1
_CHECKSUM_BYTES = 16
HEADER_START = len(MAGIC) + 4  # the header's length is the 4 bytes before it


class SnapshotError(Exception):
    """A file that must not be used; `reason` is a metric label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _checksum(data: bytes | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=_CHECKSUM_BYTES).digest()


def encode(snapshot: SavedState, fingerprint: str | Fingerprint, level: int = 3) -> bytes:
    compressed = zstandard.ZstdCompressor(level=level, write_checksum=True).compress(snapshot.data)
    fields: dict[str, object] = {
        "version": FORMAT_VERSION,
        "fingerprint": _key(fingerprint),
        "num_tokens": len(snapshot.tokens),
        "state_bytes": len(snapshot.data),
        "compressed_bytes": len(compressed),
        # how its prompt was computed: what of it a prompt that shares only some of it may
        # reuse exactly (engine/exact_reuse.py); a file without them is exact whole only
        "chunk_ends": list(snapshot.chunk_ends),
        "chunks": [list(c) for c in snapshot.chunks],
        "num_prompt": snapshot.num_prompt,
    }
    if isinstance(fingerprint, Fingerprint):
        fields["parts"] = fingerprint.parts
    header = json.dumps(fields, separators=(",", ":")).encode()
    head = b"".join(
        (MAGIC, len(header).to_bytes(4, "little"), header, array("i", snapshot.tokens).tobytes())
    )
    return b"".join((head, _checksum(head), compressed))


def read_header(data: bytes) -> dict:
    """The header alone (no checksum check): what `cache ls` shows."""
    if len(data) < len(MAGIC) + 4 or data[: len(MAGIC)] != MAGIC:
        raise SnapshotError("corrupt", "not a Reame snapshot (bad magic)")
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "little")
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start : start + size])
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # NOTE: [[[[... nests deep
        raise SnapshotError("corrupt", f"unreadable header: {exc}") from exc
    if not isinstance(header, dict):
        raise SnapshotError("corrupt", "the header is not an object")
    return header


def head_size(data: bytes) -> int:
    """How many leading bytes of a file hold its header, token ids and their checksum, from its
    first bytes (at least the header's, as read_header reads it); 0 if they do not say."""
    try:
        header = read_header(data)
        num_tokens = _size(header, "num_tokens")
    except (SnapshotError, ValueError):
        return 0
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "little")
    return len(MAGIC) + 4 + size + 4 * num_tokens + _CHECKSUM_BYTES


def read_tokens(head: bytes, fingerprint: str | Fingerprint) -> tuple[int, ...]:
    """The token ids of a file from its head alone (head_size bytes), checked against their
    checksum and the fingerprint: what the prefix index files it by, before any state is read
    (which decode checks whole when it is used). Raises SnapshotError."""
    header = read_header(head)
    start = len(MAGIC) + 4 + int.from_bytes(head[len(MAGIC) : len(MAGIC) + 4], "little")
    try:
        tokens_end = start + 4 * _size(header, "num_tokens")
    except ValueError as exc:
        raise SnapshotError("corrupt", f"header lacks sizes: {exc}") from exc
    if len(head) != tokens_end + _CHECKSUM_BYTES:
        raise SnapshotError("corrupt", "the head is cut short")
    if _checksum(head[:tokens_end]) != head[tokens_end:]:
        raise SnapshotError("corrupt", "checksum mismatch")
    if header.get("version") != FORMAT_VERSION or header.get("fingerprint") != _key(fingerprint):
        raise SnapshotError("fingerprint", "another version, model, build or KV layout")
    tokens = array("i")
    tokens.frombytes(head[start:tokens_end])
    return tuple(tokens)


def _key(fingerprint: str | Fingerprint) -> str:
    return fingerprint.key if isinstance(fingerprint, Fingerprint) else fingerprint


def _size(header: dict, name: str) -> int:
    """A size the header gives as a JSON integer: not a float (1e400 reads as infinity), a
    string or a bool, nor a number no file could hold."""
    value = header.get(name)
    if type(value) is not int or not 0 <= value < 1 << 48:
        raise ValueError(f"{name} is not a size")
    return value


def decode(
    data: bytes, fingerprint: str | Fingerprint, max_state_bytes: int | None = None
) -> SavedState:
    """Checks the sizes and the header's checksum, then the version and fingerprint, then the
    zstd frame's header against the file's, then the state's own checksum as it decompresses.
    `max_state_bytes`: a larger state is refused before anything is decompressed."""
    view = memoryview(data)
    header = read_header(data)
    # a file that is not laid out as this version's: another version's, or a damaged one
    unreadable = "corrupt" if header.get("version") == FORMAT_VERSION else "version"
    start = len(MAGIC) + 4 + int.from_bytes(data[len(MAGIC) : len(MAGIC) + 4], "little")
    try:
        num_tokens = _size(header, "num_tokens")
        compressed_bytes = _size(header, "compressed_bytes")
        state_bytes = _size(header, "state_bytes")
    except ValueError as exc:
        raise SnapshotError(unreadable, f"header lacks sizes: {exc}") from exc
    tokens_end = start + 4 * num_tokens
    state_start = tokens_end + _CHECKSUM_BYTES
    if state_start + compressed_bytes != len(data):
        raise SnapshotError(unreadable, "sizes do not add up (truncated?)")
    if max_state_bytes is not None and state_bytes > max_state_bytes:
        raise SnapshotError("corrupt", f"a state of {state_bytes} bytes: more than its tokens take")
    # NOTE: the checksum before the version and fingerprint, so that a damaged header is
    # "corrupt", not a version or fingerprint it happens to read as
    if _checksum(view[:tokens_end]) != bytes(view[tokens_end:state_start]):
        raise SnapshotError("corrupt", "checksum mismatch")
    if header.get("version") != FORMAT_VERSION:
        raise SnapshotError("version", f"format version {header.get('version')}")
    if header.get("fingerprint") != _key(fingerprint):
        reason = "fingerprint"
        if isinstance(fingerprint, Fingerprint):
            reason = fingerprint.first_difference(header.get("parts"))
        raise SnapshotError(
            reason, f"computed by another model, build, CPU backend or KV layout ({reason})"
        )
    tokens = array("i")
    tokens.frombytes(view[start:tokens_end])
    # NOTE: the frame's header is not covered by its checksum, and zstd allocates the content
    # size it reads there: a damaged one must be refused, not allocated (MemoryError)
    try:
        frame = zstandard.get_frame_parameters(view[state_start:])
    except zstandard.ZstdError as exc:
        raise SnapshotError("corrupt", f"state is not a zstd frame: {exc}") from exc
    if frame.content_size != state_bytes or not frame.has_checksum:
        raise SnapshotError("corrupt", "the state's frame header differs from the file header")
    try:
        state = zstandard.ZstdDecompressor().decompress(
            view[state_start:], max_output_size=state_bytes
        )
    except zstandard.ZstdError as exc:
        raise SnapshotError("corrupt", f"state does not decompress: {exc}") from exc
    if len(state) != state_bytes:
        raise SnapshotError("corrupt", "state size differs from the header")
    try:
        ends, chunks, num_prompt = _computed(header, num_tokens)
    except (ValueError, TypeError) as exc:
        raise SnapshotError("corrupt", f"how it was computed does not read: {exc}") from exc
    return SavedState(tuple(tokens), state, ends, chunks, num_prompt)


def _computed(
    header: dict, num_tokens: int
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...], int]:
    """The chunk ends, chunks and prompt length a header gives (none in older files), each a
    position within the state's tokens."""

    def position(value: object) -> int:
        if type(value) is not int or not 0 <= value <= num_tokens:
            raise ValueError(f"{value!r} is not a position of {num_tokens} tokens")
        return value

    ends = tuple(position(e) for e in header.get("chunk_ends", ()))
    chunks = tuple(
        (position(a), position(b)) for a, b in (tuple(c) for c in header.get("chunks", ()))
    )
    return ends, chunks, position(header.get("num_prompt", 0))
