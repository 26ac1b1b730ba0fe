from __future__ import annotations

from pathlib import Path

import pytest

from reame.api.auth import is_authorized, load_api_keys
from reame.config import Settings
from reame.errors import ConfigError


def test_only_a_configured_bearer_key_passes() -> None:
    keys = ["alpha", "beta"]
    assert is_authorized("Bearer beta", keys)
    assert not is_authorized("Bearer bet", keys)
    assert not is_authorized("Bearer betaa", keys)
    assert not is_authorized(None, keys)
    assert not is_authorized("Bearer ", keys)
    assert not is_authorized("Bearer alpha", [])


def test_a_key_outside_the_bearer_scheme_does_not_pass() -> None:
    keys = ["alpha"]
    assert is_authorized("bearer alpha", keys)  # the scheme's name is case-insensitive
    assert not is_authorized("alpha", keys)  # found by schemathesis: a bare key passed
    assert not is_authorized("Basic alpha", keys)
    assert not is_authorized("Bearer", keys)
    assert not is_authorized("Bearer", [""])


def test_keys_come_from_settings_and_a_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text("# ops team\nk-file-1\n\n  k-file-2  \n")
    settings = Settings(api_keys=["k-conf"], api_key_file=key_file)
    assert load_api_keys(settings) == ["k-conf", "k-file-1", "k-file-2"]


def test_an_unreadable_key_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read api_key_file"):
        load_api_keys(Settings(api_key_file=tmp_path / "missing"))


def test_the_environment_takes_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REAME_API_KEYS", "one, two")
    assert Settings().api_keys == ["one", "two"]
