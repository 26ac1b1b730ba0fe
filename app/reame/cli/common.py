"""Flags shared by the subcommands, and turning them into Settings."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from reame.config import Settings
from reame.config_loader import LoadedSettings, load_settings
from reame.errors import ConfigError
from reame.log import configure_logging

# flag name -> Settings key
_TUNING_FLAGS = {
    "threads": "threads",
    "context_length": "context_length",
    "batch_size": "batch_size",
    "parallel": "parallel",
}


def add_settings_flags(
    parser: argparse.ArgumentParser, with_model: bool = True, with_spec_mode: bool = True
) -> None:
    """`with_spec_mode` False where --spec means something else (the bench's workloads)."""
    if with_model:
        parser.add_argument(
            "model", nargs="?", help="catalog alias (see `reame models`) or path to a .gguf file"
        )
    g = parser.add_argument_group("settings (override reame.conf and REAME_* variables)")
    g.add_argument("--config", type=Path, help="config file (default: ./reame.conf if present)")
    g.add_argument("--models-dir", type=Path, help="where downloaded models are kept")
    g.add_argument("--threads", type=int, help="CPU threads (default: usable physical cores)")
    g.add_argument("--context-length", type=int, help="tokens per sequence (default: auto)")
    g.add_argument("--batch-size", type=int, help="tokens computed per step (default: auto)")
    g.add_argument("--parallel", type=int, help="sequences decoded together (default: auto)")
    g.add_argument("--hub-endpoint", help="Hugging Face endpoint or mirror for downloads")
    if with_spec_mode:
        g.add_argument(
            "--spec",
            dest="spec_mode",
            choices=["auto", "on", "off"],
            help="speculative decoding (default: auto)",
        )
    g.add_argument("--draft-model", help="a small model of the same vocabulary to draft from")
    g.add_argument(
        "--chat-template-file", type=Path, help="a Jinja chat template in place of the GGUF's"
    )
    g.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    g.add_argument("--log-format", choices=["auto", "console", "json"])


def settings_from_args(
    args: argparse.Namespace, default_log_level: str | None = None, **extra: object
) -> LoadedSettings:
    """Settings from flags over REAME_* over reame.conf; also sets up logging. A command may
    log less by default (`reame run` keeps the terminal for the conversation)."""
    flags: dict[str, object] = {
        key: getattr(args, flag, None) for flag, key in _TUNING_FLAGS.items()
    }
    model = getattr(args, "model", None)
    if model:
        flags["model"] = model
    for key in (
        "models_dir",
        "hub_endpoint",
        "draft_model",
        "chat_template_file",
        "log_level",
        "log_format",
    ):
        flags[key] = getattr(args, key, None)
    flags["spec"] = getattr(args, "spec_mode", None)
    flags.update(extra)
    loaded = load_settings(flags, config_file=getattr(args, "config", None))
    if model:
        # NOTE: a model named on the command line wins over a model_path from the config
        loaded.settings.model_path = None
    level = loaded.settings.log_level
    if default_log_level and loaded.origins["log_level"] == "default":
        level = default_log_level
    configure_logging(level, loaded.settings.log_format)
    return loaded


def state_directory(
    args: argparse.Namespace, default: Callable[[Settings], Path]
) -> tuple[Path, Settings]:
    """The directory a maintenance command works on: --dir, else the settings' own."""
    settings = settings_from_args(args).settings
    root = args.dir.expanduser() if args.dir else default(settings)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} is not a directory")
    return root, settings
