"""Bearer keys: where they come from, and the constant-time check."""

from __future__ import annotations

import hmac

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


def is_authorized(header: str | None, keys: list[str]) -> bool:
    """Compares against every key in constant time, so timing tells nothing of a near match."""
    given = (header or "").removeprefix("Bearer ").strip().encode()
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(given, key.encode())
    return matched
