"""The Palimpsest's records on the shared tier: each one signed, and a peer's read back strictly.
Pure.

    tag (32: TierMac over the segment's key name, the vocabulary and the record) | record

The record is palimpsest_records' own (magic, token count, crc32, token ids). A peer's bytes are
read record by record: its length bounded first (a record that claims gigabytes is refused, not
waited for), then its tag checked over all of it, then its magic and checksum, then each token id
against the vocabulary (an id the model does not have would fail the engine step it is drafted
into). A short tail is left for the next read; anything else refuses the segment.
"""

from __future__ import annotations

import numpy as np

from reame.cache.tier_mac import TAG_BYTES, TierMac
from reame.speculation.palimpsest_records import (
    CorruptSegment,
    encode_record,
    read_records,
    record_bytes,
)

MAX_RECORD_TOKENS = 1 << 20  # the longest context a setting allows: no answer is longer
MAX_RECORD_BYTES = len(encode_record(())) + 4 * MAX_RECORD_TOKENS


class RefusedSegment(Exception):
    """A peer's segment that must not be used; `reason` is a metric label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def sign_record(mac: TierMac, key: str, vocab: str, record: bytes) -> bytes:
    return mac.signed(record, key.encode(), vocab.encode())


def read_signed(
    data: bytes, mac: TierMac, key: str, vocab: str, vocab_size: int
) -> tuple[list[np.ndarray], int]:
    """The whole records of a peer's bytes, and the bytes they take; raises RefusedSegment."""
    view, context = memoryview(data), (key.encode(), vocab.encode())
    records, offset = [], 0
    while (size := record_bytes(data, offset + TAG_BYTES)) is not None:
        start = offset + TAG_BYTES
        if size > MAX_RECORD_BYTES:
            raise RefusedSegment("record", f"a record of {size} bytes at byte {offset}")
        if start + size > len(data):
            break
        if not mac.verify(view[offset:start], *context, view[start : start + size]):
            raise RefusedSegment("mac", f"the record at byte {offset} is not signed")
        try:
            (record,), _ = read_records(data[start : start + size], 0)
        except CorruptSegment as exc:
            raise RefusedSegment("record", str(exc)) from exc
        if record.size and not (record.min() >= 0 and record.max() < vocab_size):
            raise RefusedSegment("token", f"a token id outside the vocabulary at byte {offset}")
        records.append(record)
        offset = start + size
    return records, offset
