"""The shared tier's listings, parsed strictly: a field, name or status that is not exactly what a
replica writes is None (a miss), never an exception, and never a number Python would take but
no replica wrote (unicode digits, a sign, spaces, thousands of digits). Pure.

    prefix group:  "<length>-<key>"          length 1-9 ASCII digits, key 32 hex digits
    block:         "<group>/<length>-<key>"  a state that goes on past the block (group: 32 hex)
    segments:      segment name -> "open" | "sealed:<bytes>"
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_PREFIX_ENTRY = re.compile(rb"([1-9][0-9]{0,8})-([0-9a-f]{32})")
_BRANCH_ENTRY = re.compile(rb"([0-9a-f]{32})/([1-9][0-9]{0,8})-([0-9a-f]{32})")
_SEGMENT_NAME = re.compile(rb"[0-9A-Za-z][0-9A-Za-z._-]{0,99}")
_STATUS = re.compile(rb"open|sealed:(?:0|[1-9][0-9]{0,14})")


def prefix_field(length: int, key: str) -> bytes:
    return f"{length}-{key}".encode()


def prefix_entry(field: bytes) -> tuple[int, str] | None:
    """(length, key) of a prefix group's field."""
    match = _PREFIX_ENTRY.fullmatch(field)
    return (int(match[1]), match[2].decode()) if match else None


def branch_field(group: str, length: int, key: str) -> bytes:
    return f"{group}/{length}-{key}".encode()


def branch_entry(field: bytes) -> tuple[str, int, str] | None:
    """(group, length, key) of a block listing's member."""
    match = _BRANCH_ENTRY.fullmatch(field)
    return (match[1].decode(), int(match[2]), match[3].decode()) if match else None


def segment_name(name: bytes) -> str | None:
    return name.decode() if _SEGMENT_NAME.fullmatch(name) else None


def segment_status(status: bytes) -> str | None:
    """ "open" or "sealed:<bytes>"."""
    return status.decode() if _STATUS.fullmatch(status) else None


MAX_TAIL_BYTES = 8 << 20  # of one segment a sync (a longest record, 1M tokens, fits)
MAX_SYNC_BYTES = 64 << 20  # of all segments a sync; what is past it waits for the next


def tail_sizes(offsets: Sequence[int], lengths: Sequence[object]) -> list[int]:
    """How much of each segment to read: what is new past its offset, up to MAX_TAIL_BYTES;
    nothing of a segment that would take the reads past MAX_SYNC_BYTES (the next sync reads it)."""
    left, out = MAX_SYNC_BYTES, []
    for offset, length in zip(offsets, lengths, strict=True):
        new = length - offset if isinstance(length, int) else 0
        size = min(max(new, 0), MAX_TAIL_BYTES)
        size = size if size <= left else 0
        left -= size
        out.append(size)
    return out
