"""What the engine needs for speculation: the controller, the shared archive, the draft model
if one is set, and a fresh set of drafters for each sequence."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import structlog

from reame import metrics
from reame.speculation.context_lookup import ContextLookup
from reame.speculation.controller import RequestStats, SpecController
from reame.speculation.drafter import Drafter
from reame.speculation.model_drafter import DraftModel, ModelDrafter
from reame.speculation.palimpsest import Palimpsest
from reame.speculation.suggeritore import Suggeritore

log = structlog.get_logger("reame.speculation")

PROMPT_CONTEXT = 16


# a verify run's drafters in order, each with its number of drafts: one drafter, or Il
# Suggeritore's form and then the context lookup's words after it
DraftParts = tuple[tuple[str, int], ...]


@dataclass(slots=True)
class Speculation:
    controller: SpecController
    palimpsest: Palimpsest | None = None
    draft_model: DraftModel | None = None
    # Il Suggeritore's view of the model: a token's text, and a text's tokens; None: not used
    tokenizer: tuple[Callable[[int], bytes], Callable[[str], list[int]]] | None = None
    # tenancy "per_key": each scope (a key's digest) gets an archive of its own, opened when
    # first needed; `palimpsest` is then None
    open_archive: Callable[[str], Palimpsest] | None = None
    _archives: dict[str, Palimpsest] = field(default_factory=dict)
    _opening: threading.Lock = field(default_factory=threading.Lock)
    _shown: dict[str, bool] = field(default_factory=dict)  # what the gauge and the log said

    def archive(self, scope: str = "") -> Palimpsest | None:
        """The archive a request of this scope drafts from and adds to."""
        if self.open_archive is None:
            return self.palimpsest
        with (
            self._opening
        ):  # NOTE: drafters are made on the caller's thread, learning on the engine's
            if scope not in self._archives:
                self._archives[scope] = self.open_archive(scope)
            return self._archives[scope]

    def publish(self) -> None:
        """The enabled gauge of each drafter, and a log line when one turns on or off."""
        for name in self.controller.drafters:
            is_enabled = self.controller.is_enabled(name)
            if self._shown.get(name) != is_enabled:
                self._shown[name] = is_enabled
                metrics.SPEC_ENABLED.labels(name).set(int(is_enabled))
                log.info("speculation", drafter=name, enabled=is_enabled)

    def booked(
        self,
        parts: DraftParts,
        verified: int,
        accepted: int,
        own: dict[str, RequestStats] | None = None,
    ) -> None:
        """A verify run: `accepted` of the `verified` drafts kept (the step's token budget may
        have cut the run short); each drafter is booked for its own share, as far as the run
        got to it, drafter-wide and in `own` (the figures of the sequence whose run it was)."""
        offset = 0
        for name, count in parts:
            if accepted < offset:
                break  # the run stopped before this drafter's share
            share_verified = min(max(verified - offset, 0), count)
            if share_verified > 0:
                share_accepted = min(accepted - offset, count)
                self.controller.record_drafts(name, share_verified, share_accepted, own)
                metrics.SPEC_DRAFTED.labels(name).inc(share_verified)
                metrics.SPEC_ACCEPTED.labels(name).inc(share_accepted)
            metrics.SPEC_LENGTH.labels(name).set(count)
            offset += count

    def drafters(self, num_prompt: int, scope: str = "") -> dict[str, Drafter]:
        """A fresh set for a sequence whose prompt is `num_prompt` tokens."""
        out: dict[str, Drafter] = {"context": ContextLookup()}
        if self.tokenizer is not None:
            out[Suggeritore.name] = Suggeritore(*self.tokenizer, num_prompt)
        if (archive := self.archive(scope)) is not None:
            out["palimpsest"] = archive
        if self.draft_model is not None:
            out[ModelDrafter.name] = ModelDrafter(self.draft_model)
        return out

    def learn(self, tokens: Sequence[int], num_prompt: int, scope: str = "") -> None:
        """Keep a finished generation, with the prompt's last tokens that lead into it (the end
        of the question tells one answer's start from another's)."""
        archive = self.archive(scope)
        if archive is None or len(tokens) - num_prompt < 2:
            return
        archive.add(tokens[max(0, num_prompt - PROMPT_CONTEXT) :])
        archives = self._archives.values() if self.open_archive else [archive]
        metrics.PALIMPSEST_TOKENS.set(sum(a.num_tokens for a in archives))
