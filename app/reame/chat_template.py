"""Chat prompts rendered with the Jinja2 template of a GGUF file (`tokenizer.chat_template`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from reame.errors import InvalidRequestError


def _raise(message: str) -> None:
    raise TemplateError(message)


class ChatTemplate:
    """A compiled chat template. Messages are OpenAI-style dicts with `role` and `content`."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: date.today().strftime(fmt)
        self._template = env.from_string(source)
        self._bos, self._eos = bos_token, eos_token

    def render(self, messages: Sequence[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        try:
            return self._template.render(
                messages=list(messages),
                add_generation_prompt=add_generation_prompt,
                bos_token=self._bos,
                eos_token=self._eos,
            )
        except TemplateError as exc:
            raise InvalidRequestError(f"the chat template rejected the messages: {exc}") from exc


def require_template(source: str | None, model_name: str) -> str:
    if not source:
        raise InvalidRequestError(
            f"model {model_name} has no chat template in its GGUF metadata "
            "(tokenizer.chat_template); use a completion (a raw prompt) instead, or an "
            "instruction-tuned model",
            param="messages",
        )
    return source
