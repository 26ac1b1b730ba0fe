"""`docker compose up --wait` as a user runs it: Reame and Prometheus from compose.yaml, the model
pulled into the named volume by the documented command, every dashboard query answered by that
Prometheus scraping that Reame. Grafana's image cannot be pulled here: its provisioning is
checked as files (test_dashboard.py).

Needs a Docker engine and the image (REAME_IMAGE, default reame:local); skipped, saying why,
without them. Prometheus' image is built from Debian's package (tests/images/prometheus).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from compose_cli import (
    COMPOSE_FILE,
    compose,
    docker_engine,
    pull_model_into_volume,
    stand_in_image,
)
from dashboard_queries import SHOP, chat, drive_traffic, panels_without_data, wait_for_a_scrape
from server_process import free_port


@pytest.fixture(scope="module")
def project(
    smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """A compose project of its own (volumes and network), the model pulled into its volume
    from a stand-in hub, torn down with its volumes at the end. Speculation is on, not auto,
    so that the drafts the dashboard shows happen whatever the machine's load."""
    engine = docker_engine()
    override = tmp_path_factory.mktemp("compose") / "spec-on.yaml"
    override.write_text('services:\n  reame:\n    environment:\n      REAME_SPEC: "on"\n')
    env = {
        "COMPOSE_FILE": f"{COMPOSE_FILE}:{override}",
        "COMPOSE_PROJECT_NAME": f"reame-test-{uuid.uuid4().hex[:8]}",
        "REAME_PUBLISH": f"127.0.0.1:{free_port()}",
        "PROMETHEUS_PUBLISH": f"127.0.0.1:{free_port()}",
        "PROMETHEUS_IMAGE": stand_in_image(engine, "prometheus"),
    }
    try:
        pull_model_into_volume(engine, env, smollm2_path)
        yield env
    finally:
        compose("--profile", "monitoring", "down", "-v", "--remove-orphans", env=env)


def up(env: dict[str, str]) -> None:
    started = compose(
        "--profile",
        "monitoring",
        "up",
        "-d",
        "--wait",
        "--no-build",
        "reame",
        "prometheus",
        env=env,
        timeout=600,
    )
    assert started.returncode == 0, started.stderr + logs(env)


def logs(env: dict[str, str]) -> str:
    return compose("logs", "--tail", "40", env=env).stdout


def status(env: dict[str, str]) -> dict[str, dict]:
    listed = compose("--profile", "monitoring", "ps", "--format", "json", env=env).stdout
    rows = [json.loads(line) for line in listed.splitlines() if line.strip()]
    rows = rows[0] if len(rows) == 1 and isinstance(rows[0], list) else rows
    return {row["Service"]: row for row in rows}


@pytest.mark.model
def test_compose_up_serves_and_prometheus_answers_every_dashboard_query(
    project: dict[str, str],
) -> None:
    config = compose("config", "-q", env=project)
    assert config.returncode == 0, config.stderr
    up(project)
    services = status(project)
    assert services["reame"]["Health"] == "healthy"
    assert services["prometheus"]["State"] == "running"

    client = OpenAI(base_url=f"http://{project['REAME_PUBLISH']}/v1", api_key="none", max_retries=0)
    chat(client, SHOP, max_tokens=12)
    # a restart, as an upgrade does: the prefix is then found on the state volume
    restarted = compose("restart", "reame", env=project, timeout=120)
    assert restarted.returncode == 0, restarted.stderr
    up(project)
    prometheus = f"http://{project['PROMETHEUS_PUBLISH']}"
    # NOTE: twice, a scrape apart: a labelled series (per drafter) is born with the first draft,
    # and an increase needs a sample of it before more come
    for _ in range(2):
        wait_for_a_scrape(prometheus)
        drive_traffic(client)

    failing = panels_without_data(prometheus, wait=90)
    assert not failing, "panels without data:\n" + failing + "\n" + logs(project)
