"""Errors a user can act on: each carries one line saying what is wrong and how to fix it."""

from __future__ import annotations


class ReameError(Exception):
    """Base of every error shown to a user as a one-line message (CLI) or an error body (HTTP)."""

    code = "reame_error"


class ConfigError(ReameError):
    code = "invalid_config"


class ModelNotFoundError(ReameError):
    code = "model_not_found"


class ModelLoadError(ReameError):
    code = "model_load_failed"


class DownloadError(ReameError):
    code = "download_failed"


class InvalidRequestError(ReameError):
    """A request that cannot be served as asked (bad values, prompt too long, no template)."""

    code = "invalid_request"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class GrammarFailedError(InvalidRequestError):
    """A request's own grammar failed on the way (llguidance refused a token or allowed none:
    an ambiguous grammar past its parser's limits): the request's doing, a 400."""

    code = "grammar_failed"


class EngineBusyError(ReameError):
    """Every sequence and waiting place is taken: try again shortly (HTTP 429)."""

    code = "server_busy"


class EngineFailedError(ReameError):
    """The engine thread died: nothing more can be served by this process (HTTP 503)."""

    code = "engine_failed"
