"""The shared tier's signatures: HMAC-SHA256 under the replicas' secret, over an entry's Redis
key name and everything it claims (fingerprint, listing field or status, payload), so that
neither a writer without the secret nor a valid entry moved under another key checks out. Pure.

A signed value is the 32-byte tag followed by the payload. Writes sign with the current secret;
reads accept it and the previous one (a rotation: entries signed with the old secret are used
until they age out of the server).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

TAG_BYTES = 32

Field = bytes | memoryview


class TierMac:
    def __init__(self, secret: str, previous: Sequence[str] = ()) -> None:
        self._keys = [s.encode() for s in (secret, *previous)]

    def sign(self, *fields: Field) -> bytes:
        return _tag(self._keys[0], fields)

    def verify(self, tag: Field, *fields: Field) -> bool:
        return len(tag) == TAG_BYTES and any(
            hmac.compare_digest(_tag(key, fields), tag) for key in self._keys
        )

    def signed(self, payload: bytes, *context: Field) -> bytes:
        """The payload behind its tag, as the tier keeps it."""
        return self.sign(*context, payload) + payload

    def opened(self, value: bytes, *context: Field) -> bytes | None:
        """The payload of a signed value whose tag checks out; None for any other value."""
        view = memoryview(value)
        if len(view) < TAG_BYTES or not self.verify(view[:TAG_BYTES], *context, view[TAG_BYTES:]):
            return None
        return value[TAG_BYTES:]


def _tag(key: bytes, fields: Sequence[Field]) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for field in fields:  # NOTE: each field's length first: ("ab", "c") never signs as ("a", "bc")
        mac.update(len(field).to_bytes(8, "little"))
        mac.update(field)
    return mac.digest()
