"""Chat prompts rendered with the Jinja2 template of a GGUF file (`tokenizer.chat_template`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from jinja2 import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from reame.errors import ConfigError, InvalidRequestError


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # NOTE: Hugging Face's filter, not Jinja's: templates were written (and models trained)
    # against plain json.dumps, without Jinja's HTML escaping of <, >, & and '
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class ChatTemplate:
    """A compiled chat template. Messages are OpenAI-style dicts with `role` and `content`."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
        )
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: date.today().strftime(fmt)
        env.filters["tojson"] = _tojson
        self._template = env.from_string(source)
        self._bos, self._eos = bos_token, eos_token

    def render(
        self,
        messages: Sequence[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[dict[str, Any]] | None = None,
        kwargs: Mapping[str, Any] | None = None,
    ) -> str:
        """The prompt. `tools` (OpenAI {"type": "function", "function": {...}} dicts) reach the
        template only when there are some: templates test `tools is defined`. `kwargs`: more
        variables for the template (`enable_thinking`, a request's chat_template_kwargs); they
        never replace the messages, tools or special tokens."""
        extra: dict[str, Any] = dict(kwargs or {})
        extra.update(
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=self._bos,
            eos_token=self._eos,
        )
        if tools:
            extra["tools"] = list(tools)
        else:
            extra.pop("tools", None)
        try:
            return self._template.render(**extra)
        except (TemplateError, TypeError, ValueError, AttributeError) as exc:
            # NOTE: a template is code of someone else's: what it fails on is the request's
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


_PROBE = (
    {"role": "system", "content": "You are a probe."},
    {"role": "user", "content": "Hello?"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Still there?"},
)


def template_from_file(path: Path, bos_token: str, eos_token: str) -> str:
    """A user's chat template file, checked: it is read and renders a probe conversation, or
    ConfigError says in one line why not."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"chat_template_file {path}: cannot be read ({why})") from exc
    try:
        ChatTemplate(source, bos_token, eos_token).render(_PROBE, True)
    except (TemplateError, InvalidRequestError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"chat_template_file {path}: does not render a probe conversation: {why}"
        ) from exc
    return source
