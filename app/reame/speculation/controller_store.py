"""What the speculation controller measured, kept across restarts, so that the first request of
a new process starts from this machine's step costs, acceptances and draft costs.

One small file a model in `state_dir/speculation`: a header line (the format's version, the
fingerprint the figures were measured under, a blake2b of the rest) and the figures as JSON.
A step cost measured with other threads, another build or another model is not this machine's,
so the fingerprint must match. A file that does not check out is ignored (a log line, a fresh
controller), never trusted and never fatal. The counts of runs and drafts are not kept: they
are this process's, as the metrics are.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from pathlib import Path

import structlog

from reame.cache.fingerprint import Fingerprint
from reame.cache.private_files import make_dirs, write_atomic
from reame.speculation.controller import DrafterStats, SpecController

log = structlog.get_logger("reame.speculation")

VERSION = 1
SAVE_EVERY_SECONDS = 300.0

Figures = dict[str, object]


def store_fingerprint(
    fingerprint: Fingerprint, threads: int, draft_model: str = ""
) -> dict[str, str]:
    """The cache's fingerprint (model file, build, backend, KV layout), the thread count and the
    draft model's file fingerprint, if one drafts."""
    return {**fingerprint.parts, "threads": str(threads), "draft_model": draft_model}


def _checksum(content: bytes) -> str:
    return hashlib.blake2b(content, digest_size=16).hexdigest()


class ControllerStore:
    def __init__(self, directory: Path, fingerprint: dict[str, str]) -> None:
        """Named by the model file alone: a thread count or a build that changed is caught by
        the header, and the next save replaces the file."""
        self.fingerprint = fingerprint
        self.path = directory / f"controller-{fingerprint.get('model', '')[:16]}.json"

    def load(self, controller: SpecController) -> bool:
        """Put the stored figures into `controller`; False (and a log line) where there are
        none that can be trusted."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("speculation figures not read", path=str(self.path), error=str(exc))
            return False
        try:
            restore(controller, self._checked(data))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("speculation figures ignored", path=str(self.path), reason=str(exc))
            return False
        log.info("speculation figures restored", path=str(self.path))
        return True

    def save(self, figures: Figures) -> bool:
        """Write `figures` (from `measured`) atomically; False (and a log line) where it fails."""
        try:
            content = json.dumps(figures, allow_nan=False, sort_keys=True).encode()
            checksum = _checksum(content)
            header = {"version": VERSION, "fingerprint": self.fingerprint, "blake2b": checksum}
            make_dirs(self.path.parent)
            write_atomic(self.path, json.dumps(header).encode() + b"\n" + content, suffix=".tmp")
        except (OSError, ValueError) as exc:  # ValueError: a figure that is not a number
            log.warning("speculation figures not saved", path=str(self.path), error=str(exc))
            return False
        return True

    def _checked(self, data: bytes) -> Figures:
        head, newline, content = data.partition(b"\n")
        if not newline:
            raise ValueError("no header")
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("version") != VERSION:
            raise ValueError("another version")
        if header.get("fingerprint") != self.fingerprint:
            raise ValueError("measured under another fingerprint")
        if header.get("blake2b") != _checksum(content):
            raise ValueError("bad checksum")
        figures = json.loads(content)
        if not isinstance(figures, dict):
            raise ValueError("not a JSON object")
        return figures


def measured(controller: SpecController) -> Figures:
    """What the controller measured, as plain data. Safe on another thread than the engine's:
    each dict is copied whole first (one call in C, under the GIL)."""
    drafters = list(controller.drafters.items())
    return {
        "step_seconds": {str(n): t for n, t in dict(controller.step_seconds).items()},
        "checkpoint_seconds": controller.checkpoint_seconds,
        "drafters": {
            name: {
                "acceptance": s.acceptance,
                "seconds_per_draft": s.seconds_per_draft,
                "probe_seconds": s.probe_seconds,
            }
            for name, s in drafters
        },
    }


def restore(controller: SpecController, figures: Figures) -> None:
    """Put `figures` into `controller`, all or nothing: raises ValueError (or TypeError,
    KeyError) on any value out of its range."""
    steps = {}
    for n, t in _mapping(figures["step_seconds"]).items():
        size, seconds = int(n), _number(t, 0.0, math.inf)
        if size <= 0 or seconds <= 0.0:
            raise ValueError(f"a step of {n} tokens in {t} s")
        steps[size] = seconds
    checkpoint = _number(figures["checkpoint_seconds"], 0.0, math.inf)
    drafters = {}
    for name, s in _mapping(figures["drafters"]).items():
        s = _mapping(s)
        drafters[str(name)] = DrafterStats(
            acceptance=_number(s["acceptance"], 0.0, 1.0),
            seconds_per_draft=_number(s["seconds_per_draft"], 0.0, math.inf),
            probe_seconds=_number(s["probe_seconds"], 0.0, math.inf),
        )
    controller.step_seconds.update(steps)
    controller.checkpoint_seconds = checkpoint
    for name, stats in drafters.items():
        controller.drafters[name] = stats


def _mapping(value: object) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"not an object: {value!r:.40}")
    return value


def _number(value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"not a number: {value!r:.40}")
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"out of range: {value}")
    return float(value)


class PeriodicSave:
    """Saves the controller's figures every few minutes in which they changed, on a thread of
    its own (off the engine's), and once more at close."""

    def __init__(
        self, store: ControllerStore, controller: SpecController, every: float = SAVE_EVERY_SECONDS
    ) -> None:
        self.store, self.controller, self.every = store, controller, every
        self._written = measured(controller)  # NOTE: what the file holds (or nothing worth it)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reame-spec-save", daemon=True)

    def start(self) -> PeriodicSave:
        self._thread.start()
        return self

    def save(self) -> None:
        figures = measured(self.controller)
        if figures != self._written and self.store.save(figures):
            self._written = figures

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.save()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.save()
