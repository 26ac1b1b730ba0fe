"""The `reame` command as a user runs it: a real process, the real model, real files."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from state_dirs import new_state_dir

SMALL = ["--threads", "2", "--parallel", "1", "--context-length", "512"]


REAME = [sys.executable, "-m", "reame.cli.main"]
GREEDY_RUN = ["run", "--temperature", "0", "--max-tokens", "24", *SMALL]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REAME_")}
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "app")
    env["REAME_STATE_DIR"] = str(new_state_dir())
    return env


def reame(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = clean_env()
    return subprocess.run(
        [*REAME, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("reame: error: ")
    for needle in needles:
        assert needle in lines[0]


def test_help_lists_every_command() -> None:
    out = reame("--help")
    assert out.returncode == 0
    for command in ("serve", "run", "pull", "models", "bench", "config"):
        assert command in out.stdout


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["serve"], "--port"),
        (["run"], "--prompt"),
        (["pull"], "--hub-endpoint"),
        (["models"], "--models-dir"),
        (["bench"], "--synthetic"),
        (["config", "show"], "--config"),
        (["config", "check"], "--threads"),
    ],
)
def test_each_command_has_complete_help(command: list[str], flag: str) -> None:
    out = reame(*command, "--help")
    assert out.returncode == 0
    assert flag in out.stdout


@pytest.mark.model
def test_run_answers_one_prompt_on_stdout() -> None:
    out = reame(
        "run",
        "smollm2-135m",
        "--prompt",
        "Name three colors.",
        "--temperature",
        "0",
        "--max-tokens",
        "24",
        *SMALL,
    )
    assert out.returncode == 0, out.stderr
    assert "1. Red" in out.stdout


@pytest.mark.model
def test_run_reads_the_prompt_from_a_pipe() -> None:
    out = subprocess.run(
        [*REAME, *GREEDY_RUN],
        env=clean_env(),
        input="Name three colors.",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "1. Red" in out.stdout


def test_an_unknown_model_lists_the_aliases() -> None:
    assert_one_line_error(
        reame("run", "nosuch-model", "--prompt", "hi"),
        "unknown model 'nosuch-model'",
        "smollm2-135m",
    )


def test_a_missing_model_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "gone.gguf"
    assert_one_line_error(reame("run", str(missing), "--prompt", "hi"), str(missing))


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"<html>not a model</html>" * 100)
    assert_one_line_error(reame("run", str(bad), "--prompt", "hi"), "not a GGUF file")


@pytest.mark.model
def test_a_truncated_model_is_refused(tmp_path: Path, smollm2_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(smollm2_path.read_bytes()[: 8 * 2**20])
    assert_one_line_error(reame("run", str(cut), "--prompt", "hi", *SMALL), str(cut), "damaged")


@pytest.mark.model
def test_out_of_range_sampling_is_refused() -> None:
    out = reame("run", "--prompt", "hi", "--temperature", "9", *SMALL)
    assert_one_line_error(out, "temperature")


@pytest.mark.model
def test_a_prompt_longer_than_the_context_is_refused() -> None:
    out = reame("run", "--prompt", "word " * 600, *SMALL)
    assert_one_line_error(out, "tokens but a sequence's context holds 512")


@pytest.mark.model
def test_a_draft_model_of_another_vocabulary_is_refused(gemma_path: Path) -> None:
    out = reame(
        "run", "--prompt", "hi", "--draft-model", str(gemma_path), "--log-level", "error", *SMALL
    )
    assert_one_line_error(out, "another vocabulary", "must share the model's tokenizer")


def test_an_invalid_config_file_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "reame.conf").write_text("threads = -4\n")
    assert_one_line_error(reame("config", "check", cwd=tmp_path), "key 'threads'", "reame.conf")
    (tmp_path / "reame.conf").write_text("[oops\n")
    assert_one_line_error(reame("config", "check", cwd=tmp_path), "not valid TOML")


@pytest.mark.model
def test_config_check_passes_and_show_says_where_values_came_from(tmp_path: Path) -> None:
    (tmp_path / "reame.conf").write_text("port = 9123\n")
    check = reame("config", "check", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("ok: model ")
    show = reame("config", "show", "--parallel", "3", cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    lines = {line.split("=")[0].strip(): line for line in show.stdout.splitlines() if "=" in line}
    assert "# reame.conf" in lines["port"]
    assert "# flag" in lines["parallel"]
    assert "auto:" in lines["threads"] and "physical cores" in lines["threads"]
    assert "auto:" in lines["context_length"]


def test_config_show_hides_a_password_in_a_url(tmp_path: Path) -> None:
    # before the fix it printed the store's URL whole, password and all
    (tmp_path / "reame.conf").write_text(
        'shared_store = "redis://:s3cret-pw@127.0.0.1:6399/0"\n'
        f'shared_store_secret = "{"k" * 32}"\n'
    )
    show = reame("config", "show", cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert "s3cret-pw" not in show.stdout + show.stderr
    assert "k" * 32 not in show.stdout + show.stderr
    assert "redis://:***@127.0.0.1:6399/0" in show.stdout


def test_a_config_check_with_an_unknown_model_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "reame.conf").write_text('model = "nosuch"\n')
    assert_one_line_error(reame("config", "check", cwd=tmp_path), "key 'model'", "unknown model")


@pytest.mark.model
def test_models_lists_the_catalog_and_what_is_here(tmp_path: Path) -> None:
    out = reame("models", "--models-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    for alias in (
        "smollm2-135m",
        "gemma3-270m",
        "qwen2.5-0.5b",
        "qwen2.5-1.5b",
        "qwen2.5-7b",
        "olmoe-1b-7b",
    ):
        assert alias in out.stdout
    smollm = next(line for line in out.stdout.splitlines() if line.startswith("smollm2-135m"))
    assert "pypi" in smollm and "MiB" in smollm


def test_models_says_which_are_hybrid_and_the_ram_each_needs(tmp_path: Path) -> None:
    out = reame("models", "--models-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = lines[0].split()
    assert header == ["ALIAS", "SIZE", "WHERE", "MEMORY", "RAM", "DESCRIPTION"]
    rows = {line.split()[0]: line for line in lines[1:] if line and not line.startswith(" ")}
    for alias in ("qwen3.5-0.8b", "qwen3.5-4b", "qwen3.5-35b-a3b", "lfm2-1.2b"):
        assert " hybrid " in rows[alias], rows[alias]
    for alias in ("qwen3-0.6b", "qwen3-8b", "gemma3-1b", "gemma3-4b", "qwen2.5-7b"):
        assert " attention " in rows[alias], rows[alias]
    assert "not here" in rows["qwen3.5-9b"] and "GiB" in rows["qwen3.5-9b"]
    # the columns line up: each row's MEMORY and RAM start where the header's do
    memory_at, description_at = lines[0].index("MEMORY"), lines[0].index("DESCRIPTION")
    for alias in ("qwen3.5-35b-a3b", "lfm2-1.2b", "qwen3-8b"):
        assert rows[alias][memory_at:].split()[0] in {"attention", "hybrid"}
        assert rows[alias][description_at - 2 : description_at] == "  "
    assert "4 sequences x 4096 tokens" in out.stdout


def test_run_of_a_catalog_model_not_here_says_how_to_get_it(tmp_path: Path) -> None:
    (tmp_path / "reame.conf").write_text(
        f'allow_download = false\nmodels_dir = "{tmp_path / "models"}"\n'
    )
    result = reame("run", "qwen3.5-4b", "--prompt", "hi", cwd=tmp_path, timeout=120)
    assert_one_line_error(
        result, "`reame pull qwen3.5-4b`", "unsloth/Qwen3.5-4B-GGUF", "downloads are off"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.model
def test_serve_starts_answers_health_and_stops_on_sigterm() -> None:
    port = free_port()
    env = {**clean_env()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reame.cli.main", "serve", "--port", str(port), *SMALL],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        body = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    body = json.loads(r.read())
                    break
            except OSError:
                time.sleep(0.3)
        assert body == {"status": "ok"}, proc.stderr.read() if proc.poll() is not None else ""
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
            assert json.loads(r.read())["data"][0]["id"] == "smollm2-135m"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.model
def test_bench_prints_ratios_and_checks_as_json() -> None:
    out = reame(
        "bench",
        "--runs",
        "1",
        "--max-tokens",
        "8",
        "--prompt-tokens",
        "32",
        "--json",
        "--threads",
        "2",
        "--context-length",
        "512",
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    for key in (
        "prefill tok/s",
        "time to first token s",
        "aggregate decode tok/s x1",
        "aggregate decode tok/s x2",
        "aggregate decode tok/s x4",
    ):
        row = report["figures"][key]
        assert row["reame"] > 0 and row["plain"] > 0 and row["ratio"] > 0
    assert all(report["checks"].values()), report["checks"]


@pytest.mark.model
def test_run_chats_interactively_in_a_terminal() -> None:
    import pty

    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        [*REAME, *GREEDY_RUN],
        env=clean_env(),
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
    )
    os.close(secondary)

    def read_until(marker: bytes, timeout: float = 120) -> bytes:
        seen = b""
        deadline = time.monotonic() + timeout
        while marker not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(main, 4096)
            except OSError:
                break
        return seen

    try:
        assert b">>> " in read_until(b">>> ")
        os.write(main, b"Name three colors.\n")
        answer = read_until(b">>> ")
        assert b"1. Red" in answer
        os.write(main, b"/bye\n")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)


def test_bench_without_its_harness_says_how_to_install_it_in_one_line() -> None:
    # the harness is a distribution of its own (bench/): a server installed alone lacks it
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'reame_bench':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from reame.cli.main import main\n"
        "sys.exit(main(['bench', '--url', 'http://127.0.0.1:9']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, env=clean_env()
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "reame bench needs the benchmark harness: python3 -m pip install -e ./bench "
        "(from a clone of Reame)"
    ]
    assert done.stdout == ""
