"""The speculation controller's figures on disk, on real files: they come back after a restart
under the same fingerprint, and a file that does not check out (a flipped byte, cut short,
another fingerprint, another version, garbage) is ignored with a log line, never raised."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

from reame.speculation.controller import SpecController
from reame.speculation.controller_store import ControllerStore, PeriodicSave, measured

FINGERPRINT = {
    "model": "a" * 32,
    "build": "b1",
    "backend": "cpu",
    "kv_layout": "f16",
    "threads": "2",
}


def taught() -> SpecController:
    c = SpecController(mode="auto", max_length=16)
    for n in range(1, 12):
        c.record_step(n, 0.008 * n**0.75)
    for _ in range(20):
        c.record_drafts("palimpsest", 8, 8)
        c.record_drafts("context", 4, 1)
    c.record_proposal("draft-model", 0.004, 4)
    c.record_checkpoint(0.002)
    return c


def store(root: Path, **changed: str) -> ControllerStore:
    return ControllerStore(root / "speculation", {**FINGERPRINT, **changed})


def test_the_figures_come_back_in_a_new_controller(tmp_path: Path) -> None:
    before = taught()
    assert store(tmp_path).save(measured(before))
    after = SpecController(mode="auto", max_length=16)
    assert store(tmp_path).load(after)
    assert after.step_seconds == before.step_seconds
    assert after.checkpoint_seconds == before.checkpoint_seconds
    for name, stats in before.drafters.items():
        restored = after.drafters[name]
        assert restored.acceptance == stats.acceptance
        assert restored.seconds_per_draft == stats.seconds_per_draft
        assert restored.probe_seconds == stats.probe_seconds
        assert restored.runs == restored.proposed == 0  # this process's counts start at 0
    assert after.draft_length("palimpsest", 0) == before.draft_length("palimpsest", 0) > 0
    assert after.draft_length("context", 0) == 0


def test_the_file_is_private_and_replaced_whole(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.save(measured(taught()))
    s.save(measured(SpecController()))
    assert [p.name for p in s.path.parent.iterdir()] == [s.path.name]  # no temp file left
    assert s.path.stat().st_mode & 0o077 == 0
    assert s.path.parent.stat().st_mode & 0o077 == 0


def flip_a_byte(data: bytes) -> bytes:
    at = len(data) * 3 // 4  # in the figures, after the header
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def header_with(**changed: object) -> Callable[[bytes], bytes]:
    def edit(data: bytes) -> bytes:
        head, _, content = data.partition(b"\n")
        return json.dumps({**json.loads(head), **changed}).encode() + b"\n" + content

    return edit


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (flip_a_byte, "bad checksum"),
        (lambda data: data[: len(data) - 7], "bad checksum"),
        (lambda data: data[:20], "no header"),
        (lambda data: b"", "no header"),
        (lambda data: b"\x00\xff garbage \x93\n{]", ""),
        (lambda data: b"[1, 2]\n{}", "another version"),
        (header_with(version=2), "another version"),
        (header_with(fingerprint={**FINGERPRINT, "threads": "4"}), "another fingerprint"),
        (header_with(blake2b="0" * 32), "bad checksum"),
    ],
    ids=[
        "flipped-byte",
        "truncated",
        "cut-in-the-header",
        "empty",
        "garbage",
        "header-not-an-object",
        "other-version",
        "other-fingerprint",
        "wrong-checksum",
    ],
)
def test_a_file_that_does_not_check_out_is_ignored(tmp_path: Path, damage, reason: str) -> None:
    s = store(tmp_path)
    s.save(measured(taught()))
    s.path.write_bytes(damage(s.path.read_bytes()))
    fresh = SpecController(mode="auto", max_length=16)
    with structlog.testing.capture_logs() as logs:
        assert not s.load(fresh)
    assert fresh.step_seconds == {} and fresh.drafters == {}  # nothing half restored
    ignored = [e for e in logs if e["event"] == "speculation figures ignored"]
    assert len(ignored) == 1 and reason in ignored[0]["reason"], logs


def test_figures_of_another_thread_count_or_build_are_not_trusted(tmp_path: Path) -> None:
    store(tmp_path).save(measured(taught()))
    for changed in ({"threads": "4"}, {"build": "b2"}, {"draft_model": "c" * 32}):
        other = store(tmp_path, **changed)
        assert other.path == store(tmp_path).path  # one file a model: the header decides
        fresh = SpecController()
        assert not other.load(fresh) and fresh.step_seconds == {}
    another_model = store(tmp_path, model="d" * 32)
    assert another_model.path != store(tmp_path).path  # models share a state dir side by side
    assert not another_model.load(SpecController())


def resealed(s: ControllerStore, figures: object) -> None:
    """Figures written with a valid header and checksum (as a buggy or hostile writer could)."""
    content = json.dumps(figures).encode()
    s.save({})
    head = json.loads(s.path.read_bytes().partition(b"\n")[0])
    head["blake2b"] = hashlib.blake2b(content, digest_size=16).hexdigest()
    s.path.write_bytes(json.dumps(head).encode() + b"\n" + content)


@pytest.mark.parametrize(
    "figures",
    [
        {"step_seconds": {"1": -0.1}, "checkpoint_seconds": 0.0, "drafters": {}},
        {"step_seconds": {"x": 0.1}, "checkpoint_seconds": 0.0, "drafters": {}},
        {"step_seconds": {"0": 0.1}, "checkpoint_seconds": 0.0, "drafters": {}},
        {"step_seconds": {}, "checkpoint_seconds": "0", "drafters": {}},
        {"step_seconds": {"1": 0.1}, "checkpoint_seconds": 0.0, "drafters": {"a": {}}},
        {
            "step_seconds": {"1": 0.1},
            "checkpoint_seconds": 0.0,
            "drafters": {"a": {"acceptance": 1.5, "seconds_per_draft": 0, "probe_seconds": 0}},
        },
        {"step_seconds": [], "checkpoint_seconds": 0.0, "drafters": {}},
        {"checkpoint_seconds": 0.0},
        [1, 2, 3],
    ],
)
def test_figures_out_of_range_are_ignored_all_or_nothing(tmp_path: Path, figures) -> None:
    s = store(tmp_path)
    resealed(s, figures)
    fresh = SpecController()
    assert not s.load(fresh)
    assert fresh.step_seconds == {} and fresh.drafters == {} and fresh.checkpoint_seconds == 0


def test_an_unwritable_state_dir_costs_a_log_line_not_the_server(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    s = ControllerStore(blocker / "speculation", FINGERPRINT)
    with structlog.testing.capture_logs() as logs:
        assert not s.save(measured(taught()))
        assert not s.load(SpecController())
    events = [e["event"] for e in logs]
    assert events == ["speculation figures not saved", "speculation figures not read"]


def test_the_periodic_save_writes_only_what_changed_and_once_more_at_close(
    tmp_path: Path,
) -> None:
    s = store(tmp_path)
    c = SpecController()
    saver = PeriodicSave(s, c, every=0.01).start()
    try:
        time.sleep(0.05)
        assert not s.path.exists()  # nothing measured: nothing written
        c.record_step(1, 0.01)
        for _ in range(500):
            if s.path.exists():
                break
            time.sleep(0.01)
        assert s.path.exists()  # written on its thread, within a period or two
        c.record_drafts("context", 4, 4)
    finally:
        saver.close()
    again = SpecController()
    assert s.load(again)
    assert again.step_seconds == {1: 0.01}
    assert again.drafters["context"].acceptance == c.drafters["context"].acceptance
