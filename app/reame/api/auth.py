"""Who may do what: bearer keys (where they come from, the constant-time check) and loopback."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from reame.config import Settings
from reame.errors import ConfigError


def load_api_keys(settings: Settings) -> list[str]:
    """`api_keys` plus the lines of `api_key_file` (blank lines and # comments skipped)."""
    keys = list(settings.api_keys)
    if settings.api_key_file is not None:
        try:
            lines = settings.api_key_file.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(
                f"cannot read api_key_file {settings.api_key_file}: {exc.strerror}"
            ) from exc
        keys += [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return keys


def _bytes_of(header: str | None) -> bytes:
    """The key a header carries in the Bearer scheme (its name is case-insensitive, RFC 7235),
    else none: a bare key is not accepted. Sanic hands bytes that are not UTF-8 over as
    surrogates, which go back to the same bytes (never an error: a key that does not match is
    a 401)."""
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return b""
    return token.strip().encode("utf-8", "surrogateescape")


def is_authorized(header: str | None, keys: list[str]) -> bool:
    """Compares against every key in constant time, so timing tells nothing of a near match."""
    given = _bytes_of(header)
    if not given:
        return False  # no key at all never matches, not even an empty one configured by mistake
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(given, key.encode())
    return matched


def key_owner(header: str | None, keys: list[str]) -> str:
    """Who a request is, for what is kept per key (sessions; caches when scoped): a digest of its
    bearer key, never the key itself; "" on a server without keys (one tenant)."""
    if not keys:
        return ""
    given = _bytes_of(header)
    return hashlib.blake2b(given, digest_size=12, person=b"reame-owner").hexdigest()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name: it may resolve to any address
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 on a dual-stack socket
    return (mapped or address).is_loopback
