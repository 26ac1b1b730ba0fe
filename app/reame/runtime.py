"""Everything a running Reame holds, built from Settings: model, context, engine, service."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import structlog

from reame.autotune import Tuned, available_memory, tune, usable_cores
from reame.cache.fingerprint import (
    Fingerprint,
    build_fingerprint,
    cache_fingerprint,
    model_fingerprint,
)
from reame.cache.prefix_cache import CacheConfig, PrefixCache
from reame.cache.prefix_reuse import PrefixReuse
from reame.cache.preload import Preload
from reame.cache.shared_store import SharedStore
from reame.cache.state_bound import measure as measure_state_bound
from reame.cache.tier_mac import TierMac
from reame.chat_template import template_from_file
from reame.config import Settings
from reame.engine.engine import Engine
from reame.engine.request import FinishEvent, GenerationRequest
from reame.grammar.matcher import Grammars
from reame.llama.backend import build_identity, cpu_backend, set_llama_log_level
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model
from reame.models.gguf_facts import ModelFacts
from reame.models.resolve import resolve_model
from reame.service import Service
from reame.sessions import SessionStore
from reame.speculation.controller import SpecController
from reame.speculation.controller_store import ControllerStore, PeriodicSave, store_fingerprint
from reame.speculation.kit import Speculation
from reame.speculation.model_drafter import DraftModel
from reame.speculation.palimpsest import Palimpsest
from reame.speculation.palimpsest_sync import PalimpsestSync

log = structlog.get_logger("reame.runtime")


def model_file(settings: Settings) -> Path:
    if settings.model_path is not None:
        return resolve_model(str(settings.model_path), settings.models_dir, allow_download=False)
    return _resolve(settings, settings.model)


def _resolve(settings: Settings, name: str) -> Path:
    return resolve_model(
        name,
        settings.models_dir,
        hub_endpoint=settings.hub_endpoint,
        allow_download=settings.allow_download,
    )


def facts_of(model: Model) -> ModelFacts:
    return ModelFacts(
        path=model.path,
        architecture=model.architecture,
        name=model.name,
        file_size=model.path.stat().st_size,
        context_train=model.context_train,
        num_layers=model.num_layers,
        kv_bytes_per_token=model.kv_bytes_per_token,
        has_chat_template=model.chat_template is not None,
    )


def size(settings: Settings, model: Model) -> tuple[ModelFacts, Tuned]:
    facts = facts_of(model)
    return facts, tune(settings, facts, usable_cores(), available_memory())


def plan(settings: Settings) -> tuple[Path, ModelFacts, Tuned]:
    """What would be loaded and how it would be sized (the weights are mmapped, never read)."""
    path = model_file(settings)
    with Model(path) as model:
        facts, tuned = size(settings, model)
    return path, facts, tuned


def sampling_defaults(settings: Settings) -> dict[str, object]:
    keys = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "max_tokens")
    return {k: getattr(settings, k) for k in keys}


def shared_store(
    settings: Settings, fingerprint: Fingerprint, context: Context
) -> SharedStore | None:
    """Named by the model file alone: the other parts are checked entry by entry, so a
    mismatch is counted by its reason. `context`: not running yet (its states are measured)."""
    if settings.shared_store is None:
        return None
    secret, previous = settings.shared_store_secret, settings.shared_store_previous_secret
    assert secret is not None  # NOTE: Settings requires one with shared_store
    mac = TierMac(secret.get_secret_value(), [previous.get_secret_value()] if previous else [])
    model, timeout = fingerprint.parts["model"], settings.shared_store_timeout_ms / 1000
    password = settings.shared_store_password
    return SharedStore(
        settings.shared_store,
        model,
        timeout,
        mac,
        measure_state_bound(context),
        password.get_secret_value() if password else None,
    )


def fingerprint(settings: Settings, model_path: Path, kv_layout: str) -> Fingerprint:
    version, libraries = build_identity()
    build = build_fingerprint(version, libraries, settings.state_dir)
    return cache_fingerprint(model_path, kv_layout, settings.state_dir, build, cpu_backend())


def prefix_cache(
    settings: Settings, fingerprint: Fingerprint, shared: SharedStore | None, can_cut: bool
) -> PrefixCache | None:
    if not settings.prefix_cache:
        return None
    config = CacheConfig(
        directory=settings.prefix_cache_path if settings.prefix_cache_disk else None,
        ram_bytes=settings.prefix_cache_ram_mb << 20,
        disk_bytes=settings.prefix_cache_disk_mb << 20,
        compression_level=settings.prefix_cache_compression,
        min_tokens=settings.prefix_cache_min_tokens,
        max_snapshots=settings.prefix_cache_max_snapshots,
        longer_serves_prefixes=can_cut,
    )
    return PrefixCache(config, fingerprint, shared)


def speculation(
    settings: Settings,
    model: Model,
    tuned: Tuned,
    shared: SharedStore | None = None,
    syncs: list[PalimpsestSync] | None = None,
) -> Speculation:
    """The controller and the drafters' shared parts; a draft model of another vocabulary is
    refused here, at start."""
    draft = None
    if settings.draft_model is not None:
        draft_model = Model(_resolve(settings, settings.draft_model))
        try:
            draft = DraftModel(
                draft_model, model, tuned.context_length, tuned.parallel, tuned.threads
            )
        except Exception:
            draft_model.close()
            raise
    vocabulary, budget = model.tokenizer_fingerprint(), settings.palimpsest_mb << 20

    def open_archive(scope: str) -> Palimpsest:
        # NOTE: per key, one key's answers must not draft (and so, by their speed, show
        # themselves to) another's: an archive of its own, beside the others
        name = f"{vocabulary}-{scope}" if scope else vocabulary
        archive = Palimpsest(settings.palimpsest_path, name, budget)
        if shared is not None and syncs is not None:
            sync = PalimpsestSync(
                archive, shared, name, model.vocab_size, settings.shared_store_sync_seconds
            )
            syncs.append(sync.start())
        return archive

    is_per_key = settings.tenancy == "per_key"
    archive = open_archive("") if settings.palimpsest and not is_per_key else None
    tokenizer = None
    if settings.suggeritore:
        tokenizer = (model.piece, lambda text: model.tokenize(text, False, False))
    controller = SpecController(settings.spec, settings.spec_max_draft)
    opener = open_archive if settings.palimpsest and is_per_key else None
    return Speculation(controller, archive, draft, tokenizer, opener)


def controller_store(
    settings: Settings, fingerprint: Fingerprint, threads: int, speculation: Speculation
) -> ControllerStore:
    """Where the controller's figures persist: under the model's fingerprint, this thread
    count's and the draft model's, if one drafts."""
    draft = ""
    if speculation.draft_model is not None:
        draft = model_fingerprint(speculation.draft_model.model.path, settings.state_dir)
    parts = store_fingerprint(fingerprint, threads, draft)
    return ControllerStore(settings.state_dir / "speculation", parts)


def template_in_force(settings: Settings, model: Model) -> str | None:
    """The chat template requests render through: the user's file (checked), else the
    GGUF's."""
    if settings.chat_template_file is None:
        return model.chat_template
    return template_from_file(
        settings.chat_template_file,
        model.token_text(model.bos_id),
        model.token_text(model.eos_id),
    )


class Runtime:
    """Owns the model, the context and the engine thread; close() releases them in order."""

    def __init__(self, settings: Settings) -> None:
        set_llama_log_level(settings.log_level)
        self.settings = settings
        self.model_path = model_file(settings)
        self.model = Model(self.model_path)
        try:
            self.template_source = template_in_force(settings, self.model)
            self.facts, self.tuned = size(settings, self.model)
            shape = ContextShape(
                self.tuned.num_cells,
                self.tuned.batch_size,
                self.tuned.parallel,
                self.tuned.threads,
                kv_type=settings.kv_type,
            )
            self.context = Context(self.model, shape)
        except Exception:
            self.model.close()
            raise
        self.fingerprint = fingerprint(settings, self.model_path, self.context.kv_layout)
        self.shared = shared_store(settings, self.fingerprint, self.context)
        self.syncs: list[PalimpsestSync] = []
        try:
            self.speculation = speculation(
                settings, self.model, self.tuned, self.shared, self.syncs
            )
        except Exception:
            self.context.close()
            self.model.close()
            raise
        store = controller_store(settings, self.fingerprint, self.tuned.threads, self.speculation)
        store.load(self.speculation.controller)
        self.controller_saver = PeriodicSave(store, self.speculation.controller)
        self.cache = prefix_cache(settings, self.fingerprint, self.shared, self.context.can_cut)
        sessions = SessionStore(
            settings.max_sessions,
            settings.session_memory_mb << 20,
            settings.session_idle_seconds,
            max_per_owner=max(1, math.ceil(settings.key_share * settings.max_sessions)),
        )
        reuse = PrefixReuse(self.cache, sessions, self.context.can_cut, self.tuned.batch_size)
        self.engine = Engine(
            self.model,
            self.context,
            self.tuned.context_length,
            settings.max_waiting,
            on_state=reuse.keep,
            takes_snapshots=self.cache is not None,
            speculation=self.speculation,
            max_wait_seconds=settings.max_wait_seconds,
            forced_runs=settings.forced_runs,
            exact_runs=settings.spec_exact,
            probes_paths=settings.answer_memory,
        )
        self.preload: Preload | None = None
        if self.cache is not None:
            engine = self.engine
            self.cache.defer_writes_while(lambda: engine.num_running > 0)
        if self.cache is not None and settings.prefix_cache_preload:
            self.preload = Preload(self.cache, lambda: not engine.scheduler.is_idle)
        self.engine.start()
        self.controller_saver.start()
        self.service = Service(
            self.model,
            self.engine,
            sampling_defaults(settings),
            reuse,
            settings.stream_interval_ms / 1000,
            Grammars(
                self.model.vocab_handle, self.model.vocab_size, self.model.end_of_generation_ids()
            ),
            warm_ahead=settings.warm_ahead,
            template_source=self.template_source,
        )
        self._warm_up()
        if self.preload is not None:
            self.preload.start()
        log.info(
            "model ready",
            model=self.model.name,
            path=str(self.model_path),
            threads=self.tuned.threads,
            context_length=self.tuned.context_length,
            parallel=self.tuned.parallel,
            batch_size=self.tuned.batch_size,
        )

    def _warm_up(self) -> None:
        """Pay the one-time costs before the first user does: the chat template compiles and
        the first llama_decode sizes its buffers."""
        if self.template_source is not None:
            self.service.chat.prompt([{"role": "user", "content": "hello"}])
        done = threading.Event()
        params = self.service.sampling(temperature=0.0, max_tokens=1)
        request = GenerationRequest(self.model.tokenize("Hello"), params)
        self.engine.submit(request, lambda e: done.set() if isinstance(e, FinishEvent) else None)
        done.wait(60)

    def close(self) -> None:
        if self.preload is not None:
            self.preload.close()
        if self.cache is not None:  # NOTE: the idle-time work next fills the writer's queue
            self.cache.hurry_writes()
        is_stopped = self.engine.close(work_seconds=self.settings.idle_work_on_stop_seconds)
        self.controller_saver.close()  # NOTE: after the engine's last step; no llama.cpp memory
        if not is_stopped:
            # NOTE: freeing the context under a llama_decode still running would crash the
            # process in C: leave the memory to the OS, which takes it back at exit
            log.warning("the engine thread did not stop; llama.cpp resources left to the OS")
            return
        if self.cache is not None:
            self.cache.close()  # NOTE: after the engine: its last snapshots still get written
        for sync in self.syncs:
            sync.close()
        if self.shared is not None:
            self.shared.close()
        if self.speculation.draft_model is not None:
            self.speculation.draft_model.close()
        self.context.close()
        self.model.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
