"""What `reame serve` reports before it loads anything: the stores that cannot persist, once."""

from __future__ import annotations

from pathlib import Path

from conftest import small_settings
from reame.preflight import state_problem


def test_a_writable_state_directory_is_no_problem(smollm2_path: Path, tmp_path: Path) -> None:
    assert state_problem(small_settings(smollm2_path, state_dir=tmp_path)) is None


def test_every_store_that_cannot_write_is_named_in_one_reason(
    smollm2_path: Path, tmp_path: Path
) -> None:
    # NOTE: a file where each directory should be refuses as a read-only volume does, as root too
    for name in ("prefix-cache", "palimpsest", "answers"):
        (tmp_path / name).write_text("")
    problem = state_problem(small_settings(smollm2_path, state_dir=tmp_path))
    assert problem is not None
    assert "the prefix cache, the Palimpsest and the answer memory will not persist" in problem
    assert str(tmp_path / "answers") in problem


def test_a_store_that_is_off_is_not_checked(smollm2_path: Path, tmp_path: Path) -> None:
    (tmp_path / "answers").write_text("")
    settings = small_settings(smollm2_path, state_dir=tmp_path, answer_memory=False)
    assert state_problem(settings) is None
    problem = state_problem(small_settings(smollm2_path, state_dir=tmp_path))
    assert problem is not None and problem.startswith(f"cannot write {tmp_path / 'answers'} (")
    assert "the answer memory will not persist" in problem
