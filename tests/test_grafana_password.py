"""Grafana's admin password in compose is never "admin": docker/grafana/admin-password.sh, the
service's entrypoint, run here by /bin/sh on a directory standing for the grafana-data volume,
with `env` in place of the image's /run.sh so that what it hands Grafana shows. (Grafana's
image cannot be built here: no registry serves it, and Debian does not package Grafana.)"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import yaml

from compose_cli import COMPOSE_FILE, compose

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docker" / "grafana" / "admin-password.sh"


def start(data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One container start: the script, then `env` as Grafana's entrypoint."""
    base = {"PATH": os.environ["PATH"], "GF_PATHS_DATA": str(data)}
    return subprocess.run(
        ["/bin/sh", str(SCRIPT), "env"],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def handed(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert out.returncode == 0, out.stderr
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


def test_a_new_volume_gets_a_generated_password_kept_for_later_starts(tmp_path: Path) -> None:
    first = handed(start(tmp_path))
    file = Path(first["GF_SECURITY_ADMIN_PASSWORD__FILE"])
    assert file.parent == tmp_path
    password = file.read_text()
    assert len(password) == 32 and password.isalnum() and password != "admin"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert "GRAFANA_ADMIN_PASSWORD" not in first and "GF_SECURITY_ADMIN_PASSWORD" not in first
    again = handed(start(tmp_path))
    assert Path(again["GF_SECURITY_ADMIN_PASSWORD__FILE"]).read_text() == password
    other = tmp_path / "other"
    other.mkdir()
    handed(start(other))
    assert (other / "admin-password").read_text() != password


def test_the_operators_password_is_taken_on_a_new_volume_but_admin_is_refused(
    tmp_path: Path,
) -> None:
    given = handed(start(tmp_path, GRAFANA_ADMIN_PASSWORD="correct-horse"))
    assert Path(given["GF_SECURITY_ADMIN_PASSWORD__FILE"]).read_text() == "correct-horse"
    assert "GRAFANA_ADMIN_PASSWORD" not in given
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    refused = start(fresh, GRAFANA_ADMIN_PASSWORD="admin")
    assert refused.returncode != 0 and "refused" in refused.stderr
    assert not (fresh / "admin-password").exists()


def test_an_older_volume_gets_its_admin_password_changed_before_grafana_starts(
    tmp_path: Path,
) -> None:
    """A database from before the script: its admin's password is set with Grafana's CLI (a
    stand-in `grafana` on PATH records the call), and written down only once that worked."""
    (tmp_path / "grafana.db").write_bytes(b"")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    cli = bin_dir / "grafana"
    cli.write_text(f'#!/bin/sh\necho "$@" >>{calls}\nexit "${{CLI_EXIT:-0}}"\n')
    cli.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"

    failed = start(tmp_path, PATH=path, CLI_EXIT="1")
    assert failed.returncode != 0 and "docs/deployment.md" in failed.stderr
    assert not (tmp_path / "admin-password").exists()  # the next start tries again

    handed(start(tmp_path, PATH=path))
    password = (tmp_path / "admin-password").read_text()
    last = calls.read_text().splitlines()[-1].split()
    assert last[-3:] == ["admin", "reset-admin-password", password]
    assert f"cfg:default.paths.data={tmp_path}" in last


def test_compose_runs_grafana_through_the_script_with_no_default_password() -> None:
    grafana = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["grafana"]
    assert grafana["entrypoint"] == ["/bin/sh", "/etc/grafana/admin-password.sh"]
    assert grafana["command"] == ["/run.sh"]  # the image's own entrypoint, run by the script
    mount = "./docker/grafana/admin-password.sh:/etc/grafana/admin-password.sh:ro"
    assert mount in grafana["volumes"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in grafana["environment"]
    listed = compose("--profile", "monitoring", "config", "--format", "json")
    assert listed.returncode == 0, listed.stderr  # no GRAFANA_ADMIN_PASSWORD needed
    assert "admin" not in yaml.safe_load(listed.stdout)["services"]["grafana"]["environment"].get(
        "GRAFANA_ADMIN_PASSWORD", ""
    )
