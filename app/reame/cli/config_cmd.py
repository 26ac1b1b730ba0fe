"""`reame config show|check|docs`."""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit, urlunsplit

from reame.cli.common import add_settings_flags, settings_from_args
from reame.config import Settings
from reame.errors import ConfigError, ReameError
from reame.runtime import plan

SECRETS = frozenset({"api_keys"})  # settings whose values are never printed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show or check the effective settings")
    csub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = csub.add_parser("show", help="print each setting, its value and where it came from")
    add_settings_flags(show)
    show.set_defaults(handler=show_settings)
    check = csub.add_parser("check", help="validate the settings and the model; exit 2 if bad")
    add_settings_flags(check)
    check.set_defaults(handler=check_settings)
    docs = csub.add_parser("docs", help="print every setting as a Markdown table")
    docs.set_defaults(handler=print_settings_table)


def show_settings(args: argparse.Namespace) -> int:
    loaded = settings_from_args(args)
    settings = loaded.settings
    print(f"# config file: {loaded.config_file or 'none'}")
    tuned_reasons: dict[str, str] = {}
    tuned_values: dict[str, object] = {}
    try:
        path, facts, tuned = plan(settings)
        tuned_reasons = tuned.reasons
        tuned_values = {k: getattr(tuned, k) for k in tuned.reasons}
        print(f"# model: {facts.name} ({facts.architecture}) at {path}")
    except ReameError as exc:
        print(f"# model: not resolved ({exc})")
    template = settings.chat_template_file
    print(f"# chat template: {template or 'the model' + chr(39) + 's own (GGUF metadata)'}")
    width = max(len(k) for k in type(settings).model_fields)
    for key in type(settings).model_fields:
        value = tuned_values.get(key, getattr(settings, key))
        if key in SECRETS:  # NOTE: a terminal, a log or a bug report is no place for a key
            value = f"<{len(value)} hidden>" if value else "[]"
        elif isinstance(value, str):
            value = without_password(value)
        origin = tuned_reasons.get(key, loaded.origins[key])
        print(f"{key:<{width}} = {value!s:<24} # {origin}")
    return 0


def without_password(value: str) -> str:
    """A URL with its password (redis://:secret@host) shown as ***; any other value as it is."""
    try:
        url = urlsplit(value)
        password = url.password
    except ValueError:
        return value
    if not password or not url.netloc:
        return value
    user, _, host = url.netloc.rpartition("@")
    name = user.partition(":")[0]
    return urlunsplit(url._replace(netloc=f"{name}:***@{host}"))


def check_settings(args: argparse.Namespace) -> int:
    loaded = settings_from_args(args)
    try:
        path, _, tuned = plan(loaded.settings)
    except ReameError as exc:
        key = "model_path" if loaded.settings.model_path else "model"
        raise ConfigError(f"key '{key}' ({loaded.origins[key]}): {exc}") from exc
    print(
        f"ok: model {path}, {tuned.threads} threads, context {tuned.context_length}, "
        f"{tuned.parallel} parallel, batch {tuned.batch_size}"
    )
    return 0


def settings_table() -> str:
    """Every setting with its default and its own description (docs/configuration.md)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for key, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if default is None:
            shown = "unset"
        elif isinstance(default, bool):
            shown = f"`{str(default).lower()}`"
        else:
            shown = f"`{default}`"
        meaning = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{key}` | {shown} | {meaning} |")
    return "\n".join(rows) + "\n"


def print_settings_table(args: argparse.Namespace) -> int:
    print(settings_table(), end="")
    return 0
