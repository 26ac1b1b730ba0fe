"""Settings from their sources, with where each value came from: flags, the REAME_* environment,
the config file (reame.conf, or the one named); any problem a ConfigError that names the key,
its origin and the fix."""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from reame.config import ENV_PREFIX, Settings
from reame.errors import ConfigError

DEFAULT_CONFIG_FILE = Path("reame.conf")


class LoadedSettings:
    """Settings plus where each value came from: `flag`, `env`, the config file, or `default`."""

    def __init__(self, settings: Settings, origins: dict[str, str], config_file: Path | None):
        self.settings = settings
        self.origins = origins
        self.config_file = config_file


def find_config_file(explicit: Path | None, environ: Mapping[str, str]) -> Path | None:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file {explicit} does not exist")
        return explicit
    from_env = environ.get(f"{ENV_PREFIX}CONFIG")
    if from_env:
        if not Path(from_env).is_file():
            raise ConfigError(f"config file {from_env} (from {ENV_PREFIX}CONFIG) does not exist")
        return Path(from_env)
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc


def load_settings(
    flags: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
) -> LoadedSettings:
    """Build Settings; any problem becomes a ConfigError naming the key, its origin and the fix.
    pydantic-settings reads the process environment (REAME_*) itself."""
    environ = os.environ
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    path = find_config_file(config_file, environ)
    file_values = _read_toml(path) if path else {}
    env_keys = {k[len(ENV_PREFIX) :].lower() for k in environ if k.upper().startswith(ENV_PREFIX)}
    _refuse_unknown_variables(env_keys - {"config"})

    origins: dict[str, str] = {}
    for name in Settings.model_fields:
        if name in flags:
            origins[name] = "flag"
        elif name in env_keys:
            origins[name] = f"env {ENV_PREFIX}{name.upper()}"
        elif name in file_values:
            origins[name] = str(path)
        else:
            origins[name] = "default"
    for key in file_values:
        if key not in Settings.model_fields:
            raise ConfigError(f"{path}: unknown key '{key}' (see reame.conf.example for the keys)")

    cls = type(
        "Settings", (Settings,), {"model_config": {**Settings.model_config, "toml_file": path}}
    )
    try:
        settings = cls(**flags)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins)) from exc
    return LoadedSettings(settings, origins, path)


def _refuse_unknown_variables(names: set[str]) -> None:
    """A misspelt variable (REAME_API_KEY for REAME_API_KEYS) would otherwise be ignored in
    silence: here, an unauthenticated server."""
    for name in sorted(names - set(Settings.model_fields)):
        close = difflib.get_close_matches(name, Settings.model_fields, n=1)
        hint = f"; did you mean {ENV_PREFIX}{close[0].upper()}?" if close else ""
        raise ConfigError(f"unknown setting {ENV_PREFIX}{name.upper()} in the environment{hint}")


# settings whose values an error line never repeats (a key, a secret, a password)
HIDDEN = frozenset(
    {"api_keys", "shared_store_password", "shared_store_secret", "shared_store_previous_secret"}
)


def _describe(exc: ValidationError, origins: Mapping[str, str]) -> str:
    problems = []
    for err in exc.errors():
        key = str(err["loc"][0]) if err["loc"] else "?"
        origin = origins.get(key, "")
        where = f" (from {origin})" if origin and origin != "default" else ""
        shown = "input" in err and err["type"] != "extra_forbidden" and key not in HIDDEN
        value = f", got {err['input']!r}" if shown else ""
        problems.append(f"key '{key}'{where}: {err['msg']}{value}")
    return "invalid settings: " + "; ".join(problems)
