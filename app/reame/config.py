"""The one Settings object: reame.conf (TOML), then REAME_* environment variables, then CLI flags.

Built at the edge (CLI or app factory), by config_loader.load_settings; components below take only
the slice they need.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from reame.conclave.answers import RULES, compile_rule
from reame.thinking.budget import DEFAULT_EFFORT_BUDGETS

ENV_PREFIX = "REAME_"
MAKE_SECRET = 'make one with python3 -c "import secrets; print(secrets.token_hex(32))"'
MIN_SECRET_CHARACTERS = 32


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
        "(speculation, other requests) at any length, at half the KV memory and slower prefill; "
        "with f16 no draft goes past 256 tokens of context",
    )

    host: str = Field("127.0.0.1", description="where `reame serve` listens")
    port: int = Field(8000, ge=1, le=65535, description="the port it listens on")
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="bearer keys; REAME_API_KEYS takes a comma list"
    )
    api_key_file: Path | None = Field(None, description="file with one bearer key a line")
    allow_unauthenticated: bool = Field(
        False,
        description="serve without API keys on an address other than loopback (refused "
        "otherwise: anyone who reaches the port could use the server)",
    )
    metrics_auth: bool = Field(False, description="require a key for /metrics too")
    max_waiting: int = Field(64, ge=0, description="requests queued beyond the running ones")
    max_wait_seconds: float = Field(
        300.0, ge=0, description="a queued request waiting longer is refused (429); 0: no limit"
    )
    max_body_bytes: int = Field(1 << 20, ge=1024, description="largest request body (413 above)")
    max_n: int = Field(8, ge=1, le=64, description="largest n a request may ask for")
    key_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="with API keys: the share of the request places (running and queued) and of "
        "the sessions that one key may hold at once (a key over it gets 429s, or loses its own "
        "oldest session, while the others are served)",
    )
    best_of: int = Field(
        1, ge=1, le=64, description="Conclave candidates when a request does not say (1: none)"
    )
    max_best_of: int = Field(8, ge=1, le=64, description="largest best_of a request may ask for")
    conclave_temperature: float = Field(
        0.7,
        ge=0.0,
        le=2.0,
        description="a Conclave's candidates after the first sample at least this warm, each with "
        "its own seed (the first keeps the request's sampling: greedy stays greedy)",
    )
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
    tenancy: Literal["auto", "shared", "per_key"] = Field(
        "auto",
        description="shared: every key reuses every prefix and draft (one team); per_key: the "
        "prefix cache, resident prompts and the Palimpsest are kept apart per bearer key; auto: "
        "per_key with more than one key, else shared",
    )
    sse_heartbeat_seconds: float = Field(
        10.0, gt=0, le=300, description="a stream silent this long gets an SSE comment line"
    )
    client_timeout_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="a client must send its whole request, take each write of an answer, and "
        "use an idle connection again within this; otherwise it is cut off (and its work ends)",
    )
    max_connections: int = Field(
        512, ge=1, description="connections open at once; one more is closed as it comes"
    )
    drain_seconds: float = Field(30.0, ge=0, description="grace for in-flight requests on stop")
    drain_accept_seconds: float = Field(
        0.0,
        ge=0,
        le=60,
        description="on stop, new requests are still served this long while /ready says 503, "
        "so a proxy's health checks take the replica out first (behind HAProxy: above its "
        "check interval times fall)",
    )
    idle_work_on_stop_seconds: float = Field(
        5.0,
        ge=0,
        le=60,
        description="on stop, once no request is left, the idle-time work still queued (a "
        "history computed ahead, warm-ahead) runs this long at most, so the next turns after a "
        "restart find it stored",
    )
    stream_interval_ms: float = Field(
        30.0, ge=0, le=1000, description="gather a stream's tokens this long between writes"
    )
    session_idle_seconds: float = Field(1800.0, gt=0, description="a session unused this long ends")
    max_sessions: int = Field(64, ge=0, description="sessions kept at once (the oldest ends first)")
    session_memory_mb: int = Field(1024, ge=0, description="host memory for session state")
    max_responses: int = Field(
        1000,
        ge=0,
        description="Responses API answers stored for previous_response_id (the least recently "
        "used goes first; with API keys one key holds its key_share of them)",
    )
    responses_disk_mb: int = Field(
        256, ge=1, description="disk for stored responses (state_dir/responses)"
    )

    answer_memory: bool = Field(
        True,
        description="answer a greedy or seeded request asked again from memory, without "
        "decoding (only answers computed as a lone request computes them are kept)",
    )
    answer_memory_mb: int = Field(
        64,
        ge=1,
        description="disk for remembered answers (state_dir/answers; the least recently used "
        "goes first; under per-key tenancy one key holds its key_share of it)",
    )

    prefix_cache: bool = Field(True, description="keep computed prompt prefixes for reuse")
    prefix_cache_dir: Path | None = Field(
        None, description="where snapshots persist (default: state_dir/prefix-cache)"
    )
    prefix_cache_disk: bool = Field(True, description="persist snapshots on disk, not only RAM")
    prefix_cache_preload: bool = Field(
        True,
        description="at start, load the snapshots on disk into RAM (the most recently used "
        "first, within prefix_cache_ram_mb) while the engine is idle",
    )
    warm_ahead: bool = Field(
        True,
        description="after an answer, compute the template's end of turn and next user header "
        "while the engine is idle, so the next turn starts from them",
    )
    prefix_cache_ram_mb: int = Field(512, ge=0, description="host memory for hot snapshots")
    prefix_cache_disk_mb: int = Field(4096, ge=0, description="disk budget of the directory")
    prefix_cache_compression: int = Field(1, ge=1, le=19, description="zstd level on disk")
    prefix_cache_min_tokens: int = Field(64, ge=1, description="shortest prefix worth keeping")
    prefix_cache_max_snapshots: int = Field(
        4, ge=1, le=64, description="snapshots taken of one prompt at most"
    )
    shared_store: str | None = Field(
        None,
        description="a Valkey or Redis server (redis://host:6379/0) that replicas share "
        "snapshots and the Palimpsest through, after RAM and disk",
    )
    shared_store_password: SecretStr | None = Field(
        None,
        description="the shared tier's password (Valkey's requirepass), kept out of its URL, "
        "which may be logged or shown",
    )
    shared_store_secret: SecretStr | None = Field(
        None,
        description="required with shared_store, the same on every replica: every entry of the "
        "shared tier is signed with it and checked before use, so that whoever can write to the "
        f"store without it cannot choose what a replica restores ({MAKE_SECRET})",
    )
    shared_store_previous_secret: SecretStr | None = Field(
        None,
        description="after a rotation, the secret before shared_store_secret: entries signed "
        "with it are still read (never written) while they age out",
    )
    shared_store_timeout_ms: int = Field(
        250,
        ge=1,
        le=10_000,
        description="longest wait for the shared tier (to connect, or for each reply); past it "
        "the tier is skipped for 5 s and serving goes on from the local tiers",
    )
    shared_store_sync_seconds: float = Field(
        10.0,
        ge=0.1,
        le=3600,
        description="how often the Palimpsest sends its new answers to the shared tier and reads "
        "the other replicas'",
    )

    spec: Literal["auto", "on", "off"] = Field(
        "auto", description="speculative decoding: auto measures whether it pays here"
    )
    spec_max_draft: int = Field(32, ge=1, le=48, description="longest draft run verified")
    spec_exact: bool = Field(
        True,
        description="verify runs only as long as this machine computes them as it computes one "
        "token at a time (measured at start), so greedy answers are the same with drafts; false: "
        "longer runs, whose rounding can change a greedy answer as sharing a batch does",
    )
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

    chat_template_file: Path | None = Field(
        None,
        description="a Jinja chat template used in place of the GGUF's own (rendered in the "
        "same sandbox); its thinking markers and tool-call format are detected on it",
    )
    reasoning_format: Literal["separate", "inline"] = Field(
        "separate",
        description="separate: a thinking model's thought comes back as reasoning_content; "
        "inline: left in content between its markers (always separate under a schema or tools)",
    )
    reasoning_budget: int | None = Field(
        None,
        ge=0,
        description="most tokens a thought may take when a request does not say (unset: no "
        "bound); past it Reame closes the thought and the answer follows",
    )
    reasoning_effort_budgets: dict[Literal["minimal", "low", "medium", "high"], int] = Field(
        default_factory=lambda: dict(DEFAULT_EFFORT_BUDGETS),
        description="thought budgets (tokens) of reasoning_effort's levels; each is clamped to "
        "leave a quarter of max_tokens to the answer",
    )

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
        "chat_template_file",
    )
    @classmethod
    def _expand_user(cls, path: Path | None) -> Path | None:
        return path.expanduser() if path is not None else None

    @field_validator("shared_store")
    @classmethod
    def _store_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                "a redis://, rediss:// or unix:// URL (Valkey and Redis both speak it)"
            )
        return url

    @field_validator("shared_store_secret", "shared_store_previous_secret")
    @classmethod
    def _store_secret(cls, secret: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        value = secret.get_secret_value() if secret is not None else ""
        if value and len(value) < MIN_SECRET_CHARACTERS:
            raise ValueError(f"at least {MIN_SECRET_CHARACTERS} characters: {MAKE_SECRET}")
        if not value and info.field_name == "shared_store_secret" and info.data.get("shared_store"):
            raise ValueError(f"required with shared_store, the same on all replicas: {MAKE_SECRET}")
        return secret if value else None

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
    def answers_path(self) -> Path:
        return self.state_dir / "answers"

    @property
    def responses_path(self) -> Path:
        return self.state_dir / "responses"

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
