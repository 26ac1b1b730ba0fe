"""Every Prometheus metric Reame exports, in one registry (named by Prometheus conventions)."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()  # NOTE: *_created series only add noise to a dashboard
REGISTRY = CollectorRegistry()

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

REQUESTS = Counter(
    "reame_requests", "HTTP requests by route and status", ["route", "status"], registry=REGISTRY
)
REQUEST_SECONDS = Histogram(
    "reame_request_duration_seconds",
    "Time from request to last byte",
    ["route"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TIME_TO_FIRST_TOKEN = Histogram(
    "reame_time_to_first_token_seconds",
    "Time from request to its first generated token",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
PROMPT_TOKENS = Counter("reame_prompt_tokens", "Prompt tokens received", registry=REGISTRY)
CACHED_PROMPT_TOKENS = Counter(
    "reame_cached_prompt_tokens", "Prompt tokens restored instead of computed", registry=REGISTRY
)
GENERATED_TOKENS = Counter("reame_generated_tokens", "Tokens generated", registry=REGISTRY)
RUNNING = Gauge("reame_running_sequences", "Sequences being computed", registry=REGISTRY)
WAITING = Gauge("reame_waiting_requests", "Requests waiting for a free sequence", registry=REGISTRY)
CUT_OFF_CLIENTS = Counter(
    "reame_cut_off_clients",
    "Streams cut off because their client stopped reading",
    registry=REGISTRY,
)
REFUSED_CONNECTIONS = Counter(
    "reame_refused_connections",
    "Connections closed as they came: max_connections were open",
    registry=REGISTRY,
)
STEP_SECONDS = Histogram(
    "reame_engine_step_seconds",
    "Time of one llama_decode over the batch",
    buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
    registry=REGISTRY,
)
STEP_SEQUENCES = Histogram(
    "reame_engine_step_sequences",
    "Sequences sharing one llama_decode",
    buckets=(1, 2, 4, 8, 16, 32, 64),
    registry=REGISTRY,
)
SESSIONS = Gauge("reame_sessions", "Conversations whose state is kept", registry=REGISTRY)
SESSION_BYTES = Gauge("reame_session_bytes", "Bytes of kept session state", registry=REGISTRY)

PREFIX_LOOKUPS = Counter(
    "reame_prefix_cache_lookups",
    "Prefix cache lookups by where the longest prefix was found (ram, disk, shared) or miss",
    ["result"],
    registry=REGISTRY,
)
PREFIX_TOKENS = Counter(
    "reame_prefix_cache_prompt_tokens",
    "Prompt tokens of requests that looked up the cache: reused (restored) or computed",
    ["kind"],
    registry=REGISTRY,
)
PREFIX_HIT_RATIO = Gauge(
    "reame_prefix_cache_hit_ratio",
    "Share of looked-up prompt tokens restored instead of computed, since start",
    registry=REGISTRY,
)
PREFIX_BYTES = Gauge(
    "reame_prefix_cache_bytes",
    "Bytes held per tier (disk: the whole directory)",
    ["tier"],
    registry=REGISTRY,
)
PREFIX_SNAPSHOTS = Counter(
    "reame_prefix_cache_snapshots", "Prefix states saved by the engine", registry=REGISTRY
)
PREFIX_EVICTIONS = Counter(
    "reame_prefix_cache_evictions", "Snapshots evicted per tier", ["tier"], registry=REGISTRY
)
PREFIX_REJECTED = Counter(
    "reame_prefix_cache_rejected_files",
    "Stored snapshots refused and treated as misses: corrupt, version, tokens, missing (a "
    "shared listing without its blob), or the part of the fingerprint that differs (model, "
    "build, backend, kv_layout)",
    ["reason"],
    registry=REGISTRY,
)
PREFIX_WRITES = Counter(
    "reame_prefix_cache_writes",
    "Snapshots written, per tier (disk: a new file; shared: its blob and listing put)",
    ["tier"],
    registry=REGISTRY,
)
PREFIX_WRITE_DROPS = Counter(
    "reame_prefix_cache_write_drops",
    "Snapshots not written to disk because the write queue was full (in items or in bytes)",
    registry=REGISTRY,
)
PREFIX_WRITES_COVERED = Counter(
    "reame_prefix_cache_writes_covered",
    "Snapshots not written to disk because a longer state queued after them holds them at "
    "one of its chunk ends (its file serves them, cut back there)",
    registry=REGISTRY,
)
PREFIX_WRITE_FAILURES = Counter(
    "reame_prefix_cache_write_failures",
    "Snapshot writes the disk refused (full, read-only); serving goes on",
    registry=REGISTRY,
)

PREFIX_LOAD_SECONDS = Histogram(
    "reame_prefix_cache_load_seconds",
    "Time to load a stored prefix state, by tier (disk, shared) and stage: fetch (its bytes "
    "read) and decode (decompressed and checked)",
    ["tier", "stage"],
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
PREFIX_LOAD_BYTES = Counter(
    "reame_prefix_cache_load_bytes",
    "Stored bytes of prefix states read back, by tier (disk, shared)",
    ["tier"],
    registry=REGISTRY,
)
HISTORY_AHEAD_TOKENS = Counter(
    "reame_history_ahead_tokens",
    "Tokens of a conversation's history computed ahead in idle time, where the template "
    "dropped a thought from it",
    registry=REGISTRY,
)
WARM_AHEAD_TOKENS = Counter(
    "reame_warm_ahead_tokens",
    "Tokens of a conversation's next turn computed ahead, on steps nothing else needed",
    registry=REGISTRY,
)
WARM_AHEAD = Counter(
    "reame_warm_ahead",
    "Answers whose next turn was warmed ahead, by what became of it: kept (its state holds "
    "the closing tokens), taken_over (the next request went on in its sequence), yielded (its "
    "sequence was needed first; kept as computed so far), skipped (requests came too close "
    "together for it to pay)",
    ["outcome"],
    registry=REGISTRY,
)
PREFIX_PRELOADED = Counter(
    "reame_prefix_cache_preloaded",
    "Snapshots loaded from disk into RAM at start, most recently used first",
    registry=REGISTRY,
)
PROMPTS_ANSWERED_WHOLE = Counter(
    "reame_prompts_answered_whole",
    "Requests whose whole prompt a resident slot held with its last logits: the first token "
    "was picked from them, nothing of the prompt computed (the same prompt again)",
    registry=REGISTRY,
)
IDLE_STEPS_INTERRUPTED = Counter(
    "reame_idle_steps_interrupted",
    "Idle-time steps (warm-ahead, history computed ahead) stopped for a request that came: "
    "none of the step kept, it runs again at the next idle time",
    registry=REGISTRY,
)
REUSE_MATCHES = Counter(
    "reame_reuse_matches",
    "Admitted requests by where they went on from (engine/reuse_index.py): resident, "
    "warming, pinned, ram, disk, shared, or none",
    ["tier"],
    registry=REGISTRY,
)
PREFIX_RESTORE_SECONDS = Histogram(
    "reame_prefix_cache_restore_seconds",
    "Time to put a saved prefix state into a sequence of the context",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)

SHARED_BYTES = Counter(
    "reame_shared_store_bytes",
    "Bytes read from and written to the shared tier (snapshots and Palimpsest segments)",
    ["direction"],
    registry=REGISTRY,
)
SHARED_SECONDS = Histogram(
    "reame_shared_store_seconds",
    "Time of one call to the shared tier (lookup: every group of a prompt in one round trip)",
    ["op"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
    registry=REGISTRY,
)
SHARED_ERRORS = Counter(
    "reame_shared_store_errors",
    "Shared tier calls that failed (timeout, connection, response) or were skipped while it "
    "was down; serving went on from the local tiers",
    ["reason"],
    registry=REGISTRY,
)
SHARED_REFUSED = Counter(
    "reame_shared_store_refused",
    "Shared tier entries refused before use, each a miss: mac (not signed with this replica's "
    "secret), size (over what its tokens take, or a listing over its bound), listing (a field "
    "or status no replica writes), record (a Palimpsest record that does not parse), token (a "
    "token id outside the vocabulary)",
    ["reason"],
    registry=REGISTRY,
)
ANSWER_LOOKUPS = Counter(
    "reame_answer_memory_lookups",
    "Requests looked up in the answer memory: hit (answered without decoding), hit_shared (from "
    "the shared tier), miss",
    ["result"],
    registry=REGISTRY,
)
ANSWER_KEPT = Counter(
    "reame_answer_memory_writes",
    "Answers of determined requests offered to the answer memory: kept, inexact (a step shared "
    "its batch where that rounds otherwise), failed (cut by an error or abort), refused (too "
    "large, or the disk refused)",
    ["result"],
    registry=REGISTRY,
)
ANSWER_BYTES = Gauge(
    "reame_answer_memory_bytes", "Bytes of answers this replica keeps on disk", registry=REGISTRY
)
PALIMPSEST_IMPORTED = Counter(
    "reame_palimpsest_imported_records",
    "Palimpsest records read from other replicas through the shared tier",
    registry=REGISTRY,
)


def exposition() -> tuple[bytes, str]:
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


SPEC_ENABLED = Gauge(
    "reame_speculation_enabled",
    "1 while a drafter's drafts pay on this machine now (auto), 0 while it is off",
    ["drafter"],
    registry=REGISTRY,
)
SPEC_DRAFTED = Counter(
    "reame_draft_tokens", "Draft tokens verified", ["drafter"], registry=REGISTRY
)
SPEC_ACCEPTED = Counter(
    "reame_accepted_draft_tokens",
    "Draft tokens the model agreed with",
    ["drafter"],
    registry=REGISTRY,
)
SPEC_LENGTH = Gauge(
    "reame_draft_length", "Drafts in the latest verify run", ["drafter"], registry=REGISTRY
)
SPEC_REPLAYED = Counter(
    "reame_rollback_replayed_tokens",
    "Kept tokens computed again after a verify run was rolled back to its checkpoint (memory "
    "that cannot be cut back: hybrid and recurrent models)",
    registry=REGISTRY,
)
SPEC_CHECKPOINT_SECONDS = Histogram(
    "reame_rollback_checkpoint_seconds",
    "Saving one sequence's recurrent state before its verify run",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05),
    registry=REGISTRY,
)
PALIMPSEST_TOKENS = Gauge(
    "reame_palimpsest_tokens",
    "Tokens of earlier generations kept to draft from",
    registry=REGISTRY,
)
PALIMPSEST_RESIDENT_BYTES = Gauge(
    "reame_palimpsest_resident_bytes",
    "Memory the Palimpsest holds: its tokens, n-gram indexes and recent dicts",
    registry=REGISTRY,
)

PROMPT_TOKENS_COMPUTED = Counter(
    "reame_prompt_tokens_computed",
    "Prompt tokens run through the model (not restored, reused in place or shared in a group)",
    registry=REGISTRY,
)
CONCLAVES = Counter("reame_conclaves", "Best-of-N requests decided by vote", registry=REGISTRY)
CONCLAVE_STOPPED = Counter(
    "reame_conclave_stopped_candidates",
    "Candidates stopped once another answer held a majority",
    registry=REGISTRY,
)
CONCLAVE_TOKENS_SAVED = Counter(
    "reame_conclave_saved_tokens",
    "Tokens the stopped candidates did not write (estimate: as many again as each had written)",
    registry=REGISTRY,
)

GRAMMAR_REQUESTS = Counter(
    "reame_grammar_requests",
    "Requests decoded under a grammar, by kind (json_schema, json_object, lark, regex, tools...)",
    ["kind"],
    registry=REGISTRY,
)
GRAMMAR_FORCED_TOKENS = Counter(
    "reame_grammar_forced_tokens",
    "Tokens a grammar left no choice about: appended without sampling",
    registry=REGISTRY,
)
GRAMMAR_MASK_SECONDS = Histogram(
    "reame_grammar_mask_seconds",
    "Time to compute one token mask of a grammar",
    buckets=(0.00001, 0.00003, 0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1),
    registry=REGISTRY,
)


def _known_series_at_zero() -> None:
    """Each known label value is exported at 0 from the start: rate() cannot see a series'
    first count, so a replica's first shared hit or first error would never show."""
    for result in ("ram", "disk", "shared", "miss"):
        PREFIX_LOOKUPS.labels(result)
    for kind in ("reused", "computed"):
        PREFIX_TOKENS.labels(kind)
    for reason in ("corrupt", "version", "tokens", "missing", "fingerprint", "model", "build",
                   "backend", "kv_layout"):  # fmt: skip
        PREFIX_REJECTED.labels(reason)
    for tier in ("ram", "disk"):
        PREFIX_EVICTIONS.labels(tier)
    for tier in ("disk", "shared"):
        PREFIX_WRITES.labels(tier)
        PREFIX_LOAD_BYTES.labels(tier)
        for stage in ("fetch", "decode"):
            PREFIX_LOAD_SECONDS.labels(tier, stage)
    for tier in ("resident", "warming", "pinned", "ram", "disk", "shared", "none"):
        REUSE_MATCHES.labels(tier)
    for outcome in ("kept", "taken_over", "yielded"):
        WARM_AHEAD.labels(outcome)
    for direction in ("read", "written"):
        SHARED_BYTES.labels(direction)
    for op in ("lookup", "get", "put", "palimpsest"):
        SHARED_SECONDS.labels(op)
    for reason in ("timeout", "connection", "response", "skipped"):
        SHARED_ERRORS.labels(reason)
    for reason in ("mac", "size", "listing", "record", "token"):
        SHARED_REFUSED.labels(reason)
    for result in ("hit", "hit_shared", "miss"):
        ANSWER_LOOKUPS.labels(result)
    for result in ("kept", "inexact", "failed", "refused"):
        ANSWER_KEPT.labels(result)
    # NOTE: past 256 tokens of context no draft is made (engine/exact_run.py): a server's first
    # drafts may come in one scrape interval, and rate() would not see them
    for drafter in ("context", "palimpsest", "suggeritore"):
        SPEC_DRAFTED.labels(drafter)
        SPEC_ACCEPTED.labels(drafter)


_known_series_at_zero()
