"""The server `reame bench --load` and `--soak` put under load: a `reame serve` they start on
127.0.0.1 (the default) or one already running on this machine (--url)."""

from __future__ import annotations

import argparse
import json
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from reame.config import Settings
from reame_bench.load_mix import MixShape
from reame_bench.serve_process import ServeProcess, require_loopback
from reame_bench.sse_reader import BenchTargetError
from reame_bench.targets import api_base

DEFAULT_PARALLEL = 4
DEFAULT_CONTEXT = 2048
# small enough that a body over it is cheap to send 64 times, large enough for a too-long prompt
BENCH_MAX_BODY = 256 * 1024
# a server already running is taken to have the defaults, and a context up to this long
URL_CONTEXT = 8192


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """How the started server is set up (ignored with a URL, which is served as it is)."""

    model: str | None = None
    threads: int | None = None
    context_length: int | None = None
    batch_size: int | None = None
    parallel: int | None = None
    models_dir: Path | None = None
    config: Path | None = None
    max_waiting: int = 8
    extra: dict[str, str] = field(default_factory=dict)  # more REAME_* settings

    @classmethod
    def of(cls, args: argparse.Namespace) -> ServeOptions:
        """As `reame bench`'s flags say."""
        return cls(
            args.model,
            args.threads,
            args.context_length,
            args.batch_size,
            args.parallel,
            args.models_dir,
            args.config,
            args.max_waiting,
        )


@dataclass(slots=True)
class LoadTarget:
    base: str
    model: str
    shape: MixShape
    headers: dict[str, str]
    detail: dict[str, object]
    process: ServeProcess | None = None

    @classmethod
    def start(cls, options: ServeOptions) -> LoadTarget:
        parallel = options.parallel or DEFAULT_PARALLEL
        context = options.context_length or DEFAULT_CONTEXT
        args = serve_args(options, parallel, context)
        settings = {
            "max_waiting": str(options.max_waiting),
            "max_body_bytes": str(BENCH_MAX_BODY),
            **options.extra,
        }
        process = ServeProcess(args, settings)
        try:
            model = first_model(process.url, {})
        except BaseException:
            process.stop()
            raise
        detail = {
            "server": f"reame serve started on {process.url} (pid {process.pid})",
            "model": model,
            "parallel": parallel,
            "max_waiting": options.max_waiting,
            "context_length": context,
            "max_body_bytes": BENCH_MAX_BODY,
            "state_dir": str(process.state_dir),
        }
        shape = MixShape(model, BENCH_MAX_BODY, context)
        return cls(process.url, model, shape, {}, detail, process)

    @classmethod
    def open(cls, url: str, api_key: str | None, context_length: int | None) -> LoadTarget:
        base = api_base(require_loopback(url))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        model = first_model(base, headers)
        context = context_length or URL_CONTEXT
        max_body = Settings.model_fields["max_body_bytes"].default
        detail = {
            "server": f"{base} (running; its own settings, taken to be the defaults)",
            "model": model,
            "context_length (assumed)": context,
        }
        return cls(base, model, MixShape(model, max_body, context), headers, detail)

    def close(self) -> int | None:
        """Stops the server if this bench started it; its exit code."""
        return self.process.stop() if self.process else None


def serve_args(options: ServeOptions, parallel: int, context: int) -> list[str]:
    """What follows `reame serve` for these options."""
    args = [options.model] if options.model else []
    args += ["--parallel", str(parallel), "--context-length", str(context)]
    for flag, value in (
        ("--threads", options.threads),
        ("--batch-size", options.batch_size),
        ("--models-dir", options.models_dir),
        ("--config", options.config),
    ):
        if value is not None:
            resolved = value.resolve() if isinstance(value, Path) else value
            args += [flag, str(resolved)]
    if options.model and Path(options.model).is_file():
        args[0] = str(Path(options.model).resolve())  # NOTE: the child runs elsewhere
    return args


def first_model(base: str, headers: dict[str, str]) -> str:
    request = urllib.request.Request(f"{base}/v1/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            data = json.loads(r.read()).get("data") or []
        return str(data[0]["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise BenchTargetError(f"{base}/v1/models: {exc}") from exc
