from __future__ import annotations

from pathlib import Path

import pytest

from reame.config_loader import load_settings
from reame.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in [k for k in __import__("os").environ if k.startswith("REAME_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_flags_win_over_environment_over_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = write(tmp_path / "reame.conf", "threads = 3\nparallel = 2\nport = 9000\n")
    monkeypatch.setenv("REAME_PARALLEL", "6")
    monkeypatch.setenv("REAME_PORT", "9100")
    loaded = load_settings({"port": 9200}, config_file=conf)
    s = loaded.settings
    assert (s.threads, s.parallel, s.port) == (3, 6, 9200)
    assert loaded.origins["threads"] == str(conf)
    assert loaded.origins["parallel"] == "env REAME_PARALLEL"
    assert loaded.origins["port"] == "flag"
    assert loaded.origins["host"] == "default"


def test_reame_conf_in_the_working_directory_is_found(tmp_path: Path) -> None:
    write(tmp_path / "reame.conf", 'model_path = "./models/x.gguf"\n')
    loaded = load_settings({})
    assert loaded.settings.model_path == Path("models/x.gguf")
    assert loaded.config_file == Path("reame.conf")


def test_the_example_config_is_valid() -> None:
    example = Path(__file__).parents[1] / "reame.conf.example"
    loaded = load_settings({}, config_file=example)
    assert loaded.settings.model == "smollm2-135m"


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    conf = write(tmp_path / "bad.conf", "threads = = 2\n")
    with pytest.raises(ConfigError, match="bad.conf is not valid TOML"):
        load_settings({}, config_file=conf)


def test_an_unknown_key_is_named(tmp_path: Path) -> None:
    conf = write(tmp_path / "bad.conf", "thredas = 2\n")
    with pytest.raises(ConfigError, match="unknown key 'thredas'"):
        load_settings({}, config_file=conf)


def test_a_bad_value_names_the_key_and_where_it_came_from(tmp_path: Path) -> None:
    conf = write(tmp_path / "bad.conf", "threads = 0\n")
    with pytest.raises(ConfigError, match=r"key 'threads' \(from .*bad.conf\).*greater than"):
        load_settings({}, config_file=conf)


def test_a_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REAME_PORT", "eighty")
    with pytest.raises(ConfigError, match="key 'port' \\(from env REAME_PORT\\)"):
        load_settings({})


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings({}, config_file=tmp_path / "nope.conf")


def test_paths_expand_the_home_directory() -> None:
    assert "~" not in str(load_settings({}).settings.models_dir)


def test_the_configuration_doc_is_the_settings_own_table() -> None:
    """docs/configuration.md ends with what `reame config docs` prints: regenerate it with
    `reame config docs` when a setting changes."""
    from reame.cli.config_cmd import settings_table

    doc = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    assert doc.endswith(settings_table())


def test_an_error_line_never_repeats_a_secret(tmp_path: Path) -> None:
    conf = write(
        tmp_path / "r.conf",
        'shared_store = "redis://127.0.0.1:6399/0"\nshared_store_secret = "too-short-s3cret"\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_settings({}, config_file=conf)
    assert "shared_store_secret" in str(caught.value)
    assert "too-short-s3cret" not in str(caught.value)
