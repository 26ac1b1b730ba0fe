"""The fingerprint that guards every stored state covers every byte of the model file: an edited
model of the same size (its mtime even set back) never meets a state of the old one; the hash is
remembered in the state dir by the file's stat, and a damaged memo is ignored and rewritten."""

from __future__ import annotations

import json
import os
import queue
import shutil
from pathlib import Path

import pytest

from conftest import small_settings
from reame.cache.disk_tier import SUFFIX
from reame.cache.file_digest import MEMO_NAME, cached_digest, digest, read_memo, stat_key
from reame.cache.fingerprint import build_fingerprint, cache_fingerprint, model_fingerprint
from reame.engine.request import FinishEvent
from reame.runtime import Runtime
from reame.service import Job
from reame_bench.workloads import filler_text


@pytest.fixture
def model_copy(smollm2_path: Path, tmp_path: Path) -> Path:
    target = tmp_path / "model" / smollm2_path.name
    target.parent.mkdir()
    shutil.copyfile(smollm2_path, target)
    return target


def edit_middle(path: Path, keep_mtime: bool = True) -> None:
    """Flip low bits of 16 bytes halfway into the file (far from its first and last 4 MiB),
    in place: same size, same inode; the mtime set back to what it was."""
    before = path.stat()
    with path.open("r+b") as f:
        f.seek(before.st_size // 2)
        chunk = bytearray(f.read(16))
        f.seek(before.st_size // 2)
        f.write(bytes(b ^ 0x01 for b in chunk))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_ino) == (before.st_size, before.st_ino)
    assert after.st_mtime_ns == before.st_mtime_ns or not keep_mtime


def test_an_edit_in_the_middle_of_the_same_size_changes_the_fingerprint(
    model_copy: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = model_fingerprint(model_copy, state)
    assert model_fingerprint(model_copy, state) == first  # from the memo now
    assert model_fingerprint(model_copy) == first  # the same with no memo
    edit_middle(model_copy)
    assert model_fingerprint(model_copy) != first
    # NOTE: the memo's key holds the ctime, which utime moved on: the edit is seen through it
    assert model_fingerprint(model_copy, state) != first
    assert cache_fingerprint(model_copy, "kv", state) != cache_fingerprint(model_copy, "kv2", state)


def test_the_build_and_the_cpu_backend_are_parts_of_the_fingerprint(
    model_copy: Path, tmp_path: Path
) -> None:
    libs = [tmp_path / "libllama.so", tmp_path / "libggml-cpu.so"]
    for lib in libs:
        lib.write_bytes(os.urandom(4096))
    build = build_fingerprint("0.3.36", libs, tmp_path / "state")
    edit_middle(libs[1])  # the same source compiled otherwise: other bytes
    assert build_fingerprint("0.3.36", libs, tmp_path / "state") != build
    assert build_fingerprint("0.3.37", libs, None) != build_fingerprint("0.3.36", libs, None)
    x86 = cache_fingerprint(model_copy, "kv f16/f16", None, build, "AVX512 = 1")
    arm = cache_fingerprint(model_copy, "kv f16/f16", None, build, "NEON = 1 | SVE = 1")
    other_build = cache_fingerprint(model_copy, "kv f16/f16", None, "b2", "AVX512 = 1")
    assert len({x86.key, arm.key, other_build.key}) == 3
    assert x86.first_difference(arm.parts) == "backend"
    assert x86.first_difference(other_build.parts) == "build"
    assert x86.first_difference(None) == "fingerprint"  # a header of before the parts


def test_a_running_server_fingerprints_its_own_build_and_backend(smollm2_path: Path) -> None:
    from reame.llama.backend import build_identity, cpu_backend

    version, libs = build_identity()
    assert any(p.name.startswith("libllama") for p in libs)
    assert "CPU" in cpu_backend()  # llama.cpp's own report of the backend's features
    assert version


def test_an_unchanged_file_is_not_read_again(model_copy: Path, tmp_path: Path) -> None:
    cached_digest(model_copy, tmp_path)
    memo_path = tmp_path / MEMO_NAME
    assert (memo_path.stat().st_mode & 0o777) == 0o600
    key = stat_key(model_copy.stat())
    assert read_memo(memo_path) == {key: digest(model_copy)}
    memo_path.write_text(json.dumps({key: "ab" * 16}))  # what a stat-keyed memo would say
    assert cached_digest(model_copy, tmp_path) == "ab" * 16


@pytest.mark.parametrize("damage", ["{not json", '["a list"]', '{"k": 5}', '{"k": "zz"}', ""])
def test_a_damaged_memo_is_ignored_and_rewritten(
    model_copy: Path, tmp_path: Path, damage: str
) -> None:
    memo_path = tmp_path / MEMO_NAME
    memo_path.write_text(damage)
    assert cached_digest(model_copy, tmp_path) == digest(model_copy)
    assert read_memo(memo_path) == {stat_key(model_copy.stat()): digest(model_copy)}


def test_a_read_only_state_dir_still_fingerprints(model_copy: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")  # a memo dir that cannot be made
    assert cached_digest(model_copy, blocker / "state") == digest(model_copy)


SYSTEM = "You answer in one short sentence. " + filler_text(seed=5, num_words=300)


def cached_tokens(runtime: Runtime) -> int:
    service = runtime.service
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Why?"}]
    prompt = service.chat.prompt(messages)
    job = Job(
        prompt,
        service.sampling(temperature=0.0, max_tokens=4),
        marks=service.chat.marks(messages, prompt),
    )
    events: queue.SimpleQueue = queue.SimpleQueue()
    runtime.engine.submit(service.request(job), events.put)
    while not isinstance(event := events.get(timeout=120), FinishEvent):
        pass
    service.finished(event)
    return event.num_cached_tokens


@pytest.mark.model
def test_a_stale_snapshot_of_an_edited_model_is_a_miss(model_copy: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    settings = small_settings(model_copy, spec="off", state_dir=state, palimpsest=False)
    with Runtime(settings) as runtime:
        assert cached_tokens(runtime) == 0
        assert runtime.cache is not None
        runtime.cache.flush()
    assert list(state.rglob(f"*{SUFFIX}"))  # on disk for the next start
    with Runtime(settings) as runtime:
        assert cached_tokens(runtime) >= 300  # the same model: restored
    edit_middle(model_copy)
    with Runtime(settings) as runtime:
        assert cached_tokens(runtime) == 0  # an edited model: the old states are misses
