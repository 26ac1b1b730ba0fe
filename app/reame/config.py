"""The one Settings object: reame.conf (TOML), then REAME_* environment variables, then CLI flags.

Built at the edge (CLI or app factory); components below take only the slice they need.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from reame.conclave.answers import RULES, compile_rule
from reame.errors import ConfigError

ENV_PREFIX = "REAME_"
DEFAULT_CONFIG_FILE = Path("reame.conf")


class Settings(BaseSettings):
    """Every key is documented in reame.conf.example. `None` means "pick automatically"."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", protected_namespaces=(), validate_default=True
    )

    model: str = Field("smollm2-135m", min_length=1, description="catalog alias or .gguf path")
    model_path: Path | None = Field(None, description="explicit GGUF file; wins over `model`")
    models_dir: Path = Field(
        Path("~/.cache/reame/models"), description="downloaded and assembled models"
    )
    state_dir: Path = Field(
        Path("~/.cache/reame/state"),
        description="what Reame keeps across restarts (caches, Palimpsest)",
    )
    hub_endpoint: str | None = Field(None, description="Hugging Face endpoint or mirror URL")
    allow_download: bool = Field(True, description="fetch a catalog model that is not here")

    threads: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="CPU threads (auto: the physical cores this process may use)",
    )
    context_length: int | None = Field(
        None,
        ge=64,
        le=1 << 20,
        description="tokens a sequence holds (auto: min(trained, 4096), fitted to free memory)",
    )
    batch_size: int | None = Field(
        None, ge=1, le=65536, description="tokens computed a step (auto: 512)"
    )
    parallel: int | None = Field(
        None, ge=1, le=256, description="sequences decoded together (auto: 4)"
    )
    kv_type: Literal["f16", "q8_0"] = Field(
        "f16",
        description="KV cache type: q8_0 keeps greedy output identical whatever shares a batch "
        "(speculation, other requests) at any length, at half the KV memory and slower prefill",
    )

    host: str = Field("127.0.0.1", description="where `reame serve` listens")
    port: int = Field(8000, ge=1, le=65535, description="the port it listens on")
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="bearer keys; REAME_API_KEYS takes a comma list"
    )
    api_key_file: Path | None = Field(None, description="file with one bearer key a line")
    metrics_auth: bool = Field(False, description="require a key for /metrics too")
    max_waiting: int = Field(64, ge=0, description="requests queued beyond the running ones")
    max_wait_seconds: float = Field(
        300.0, ge=0, description="a queued request waiting longer is refused (429); 0: no limit"
    )
    max_body_bytes: int = Field(1 << 20, ge=1024, description="largest request body (413 above)")
    max_n: int = Field(8, ge=1, le=64, description="largest n a request may ask for")
    best_of: int = Field(
        1, ge=1, le=64, description="Conclave candidates when a request does not say (1: none)"
    )
    max_best_of: int = Field(8, ge=1, le=64, description="largest best_of a request may ask for")
    vote_on: str = Field(
        "auto",
        description="answer voted on: auto, number, choice, line, a name from vote_rules, or a "
        "regular expression",
    )
    vote_rules: dict[str, str] = Field(
        default_factory=dict,
        description="named regular expressions a request may vote on by name (a request never "
        "sends a regular expression of its own)",
    )
    tenancy: Literal["shared", "per_key"] = Field(
        "shared",
        description="shared: every key reuses every prefix and draft (one team); per_key: the "
        "prefix cache, resident prompts and the Palimpsest are kept apart per bearer key",
    )
    sse_heartbeat_seconds: float = Field(
        10.0, gt=0, le=300, description="a stream silent this long gets an SSE comment line"
    )
    drain_seconds: float = Field(30.0, ge=0, description="grace for in-flight requests on stop")
    stream_interval_ms: float = Field(
        30.0, ge=0, le=1000, description="gather a stream's tokens this long between writes"
    )
    session_idle_seconds: float = Field(1800.0, gt=0, description="a session unused this long ends")
    max_sessions: int = Field(64, ge=0, description="sessions kept at once (the oldest ends first)")
    session_memory_mb: int = Field(1024, ge=0, description="host memory for session state")

    prefix_cache: bool = Field(True, description="keep computed prompt prefixes for reuse")
    prefix_cache_dir: Path | None = Field(
        None, description="where snapshots persist (default: state_dir/prefix-cache)"
    )
    prefix_cache_disk: bool = Field(True, description="persist snapshots on disk, not only RAM")
    prefix_cache_ram_mb: int = Field(512, ge=0, description="host memory for hot snapshots")
    prefix_cache_disk_mb: int = Field(4096, ge=0, description="disk budget of the directory")
    prefix_cache_compression: int = Field(1, ge=1, le=19, description="zstd level on disk")
    prefix_cache_min_tokens: int = Field(64, ge=1, description="shortest prefix worth keeping")
    prefix_cache_max_snapshots: int = Field(
        4, ge=1, le=64, description="snapshots taken of one prompt at most"
    )

    spec: Literal["auto", "on", "off"] = Field(
        "auto", description="speculative decoding: auto measures whether it pays here"
    )
    spec_max_draft: int = Field(32, ge=1, le=48, description="longest draft run verified")
    draft_model: str | None = Field(
        None, description="a small model with the same vocabulary to draft from (alias or path)"
    )
    suggeritore: bool = Field(
        True, description="suggest the structure of lists, tables and JSON as drafts"
    )
    palimpsest: bool = Field(True, description="keep finished generations to draft from")
    forced_runs: bool = Field(
        True,
        description="tokens a grammar forces are computed together in one step (false: one a "
        "step, for comparison)",
    )
    palimpsest_dir: Path | None = Field(
        None, description="where they persist (default: state_dir/palimpsest)"
    )
    palimpsest_mb: int = Field(256, ge=1, description="disk budget of the archive")

    temperature: float = Field(0.8, ge=0.0, le=2.0, description="default sampling temperature")
    top_k: int = Field(40, ge=0, description="default top-k (0: off)")
    top_p: float = Field(0.95, gt=0.0, le=1.0, description="default top-p")
    min_p: float = Field(0.05, ge=0.0, le=1.0, description="default min-p")
    repetition_penalty: float = Field(
        1.0, gt=0.0, le=10.0, description="default repetition penalty"
    )
    max_tokens: int = Field(512, ge=1, description="default most tokens an answer may have")

    hold_on_error: bool = Field(
        False,
        description="a `reame serve` that cannot start keeps answering /health with the reason "
        "instead of exiting (containers, where an exit means a restart loop)",
    )

    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log level")
    log_format: Literal["auto", "console", "json"] = Field(
        "auto", description="auto: readable on a terminal, JSON lines otherwise"
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [k.strip() for k in value.split(",") if k.strip()]
        return value

    @field_validator(
        "models_dir",
        "state_dir",
        "model_path",
        "api_key_file",
        "prefix_cache_dir",
        "palimpsest_dir",
    )
    @classmethod
    def _expand_user(cls, path: Path | None) -> Path | None:
        return path.expanduser() if path is not None else None

    @field_validator("vote_rules")
    @classmethod
    def _named_rules(cls, rules: dict[str, str]) -> dict[str, str]:
        for name, pattern in rules.items():
            if name in RULES or not name.isidentifier():
                raise ValueError(f"vote rule name {name!r}: a word other than {', '.join(RULES)}")
            compile_rule(pattern)  # NOTE: a ValueError is a pydantic validation error
        return rules

    @model_validator(mode="after")
    def _vote_rule(self) -> Settings:
        if self.vote_on not in self.vote_rules:
            compile_rule(self.vote_on)
        return self

    @property
    def named_vote_rules(self) -> dict[str, str | re.Pattern[str]]:
        """What a request may name in vote_on: the built-in rules and the configured ones."""
        return {**{r: r for r in RULES}, **{n: re.compile(p) for n, p in self.vote_rules.items()}}

    @property
    def prefix_cache_path(self) -> Path:
        return self.prefix_cache_dir or self.state_dir / "prefix-cache"

    @property
    def palimpsest_path(self) -> Path:
        return self.palimpsest_dir or self.state_dir / "palimpsest"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # NOTE: order is precedence: flags (init) over environment over reame.conf
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls)


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


def _describe(exc: ValidationError, origins: Mapping[str, str]) -> str:
    problems = []
    for err in exc.errors():
        key = str(err["loc"][0]) if err["loc"] else "?"
        origin = origins.get(key, "")
        where = f" (from {origin})" if origin and origin != "default" else ""
        value = (
            f", got {err['input']!r}" if "input" in err and err["type"] != "extra_forbidden" else ""
        )
        problems.append(f"key '{key}'{where}: {err['msg']}{value}")
    return "invalid settings: " + "; ".join(problems)
