"""The provisioned Grafana dashboard, every query of it run by a real Prometheus scraping a real
`reame serve`, and the compose file that wires Reame, Prometheus and Grafana together."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from openai import OpenAI

from compose_cli import COMPOSE_FILE, compose
from dashboard_queries import (
    CLUSTER_ROW,
    DASHBOARD,
    SERVER_ROW,
    SHOP,
    chat,
    drive_traffic,
    grafana_expr,
    panels,
    panels_without_data,
    rows,
    wait_for_a_scrape,
)
from haproxy_process import HAProxy
from reame import metrics
from server_process import ServerProcess, free_port
from state_dirs import new_state_dir

ROOT = Path(__file__).parents[1]
# NOTE: speculation on, not auto: the drafts the dashboard shows happen whatever the load
ARGS = ("--threads", "2", "--parallel", "4", "--context-length", "1024", "--spec", "on")
PROVISIONING = ROOT / "docker/grafana/provisioning"
PROMETHEUS_CONFIG = ROOT / "docker/prometheus/prometheus.yml"


def load_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# -- a real Reame scraped by a real Prometheus ---------------------------------------------------


def start_prometheus(binary: str, work: Path, target: str) -> tuple[subprocess.Popen, str]:
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "reame", "static_configs": [{"targets": [target]}]}],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{free_port()}"
    with open(work / "prometheus.log", "w") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address={url.removeprefix('http://')}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"prometheus did not start: {(work / 'prometheus.log').read_text()}")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(
            "the dashboard's queries need a real Prometheus: apt-get install prometheus "
            "(Debian's package puts it at /usr/bin/prometheus)"
        )
    state = str(new_state_dir())
    warm = ServerProcess(*ARGS, env={"REAME_STATE_DIR": state})
    try:  # NOTE: stopping flushes the prefix cache to disk, where the next server finds it
        chat(OpenAI(base_url=f"{warm.url}/v1", api_key="unused"), SHOP, max_tokens=12)
    finally:
        warm.stop()
    # NOTE: no preload, which would serve from RAM what this one is to find on disk
    server = ServerProcess(*ARGS, env={"REAME_STATE_DIR": state, "REAME_PREFIX_CACHE_PRELOAD": "0"})
    try:
        proc, url = start_prometheus(
            binary, tmp_path_factory.mktemp("prometheus"), f"127.0.0.1:{server.port}"
        )
        try:
            wait_for_a_scrape(url)
            drive_traffic(OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0))
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        server.stop()


@pytest.mark.model
def test_every_panel_query_returns_data_from_a_real_reame(prometheus: str) -> None:
    failing = panels_without_data(prometheus)
    assert not failing, "panels without data:\n" + failing


def label_values(url: str, panel_title: str, label: str) -> set[str]:
    (panel,) = [p for p in panels() if p["title"] == panel_title]
    query = {"query": grafana_expr(panel["targets"][0]["expr"])}
    body = httpx.get(f"{url}/api/v1/query", params=query, timeout=10).json()
    return {series["metric"][label] for series in body["data"]["result"]}


def counted(url: str, counter: str, label: str) -> set[str]:
    """The values of `label` whose series of `counter` have counted something (every known
    one is exported at 0 from the start)."""
    body = httpx.get(f"{url}/api/v1/query", params={"query": f"{counter} > 0"}, timeout=10)
    return {series["metric"][label] for series in body.json()["data"]["result"]}


@pytest.mark.model
def test_the_splits_show_every_tier(prometheus: str) -> None:
    def splits() -> tuple[set[str], set[str], set[str]]:
        return (
            counted(prometheus, "reame_prefix_cache_lookups_total", "result"),
            label_values(prometheus, "Store sizes", "tier"),
            label_values(prometheus, "Speculation on/off per drafter", "drafter"),
        )

    def tier(result: str) -> str:  # NOTE: a state found by a prefix it shares is the tier's too
        return result.removesuffix("_partial")

    deadline = time.monotonic() + 60  # the disk tier shows once the writer has written
    while True:
        lookups, tiers, drafters = splits()
        if {tier(r) for r in lookups} == {"ram", "disk", "miss"} and tiers == {"ram", "disk"}:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    assert {tier(r) for r in lookups} == {"ram", "disk", "miss"}  # one replica: no shared tier
    series = label_values(prometheus, "Prefix cache lookups: RAM / disk / shared / miss", "result")
    assert {tier(s) for s in series} == {"ram", "disk", "shared", "miss"}
    assert tiers == {"ram", "disk"}
    assert {"context", "palimpsest"} <= drafters


# -- the dashboard and its provisioning, read as files ------------------------------------------


def exported_series() -> set[str]:
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}
    return {
        family.name + suffix
        for family in metrics.REGISTRY.collect()
        for suffix in suffixes[family.type]
    }


def test_the_dashboard_names_only_metrics_reame_exports() -> None:
    exported = exported_series()
    for panel in panels():
        for target in panel["targets"]:
            unknown = set(re.findall(r"\breame_\w+", target["expr"])) - exported
            assert not unknown, f"panel {panel['title']!r} queries {unknown}"


def haproxy_exported_series() -> set[str]:
    """The series names of HAProxy's Prometheus exporter, asked on a real haproxy running the
    shipped config with one replica address nobody answers on: every per-server family shows
    for a server that is DOWN."""
    proxy = HAProxy([f"127.0.0.1:{free_port()}"], up=0)
    try:
        text = httpx.get(f"{proxy.stats}/metrics", timeout=5).text
    finally:
        proxy.stop()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}


def test_the_dashboard_names_only_metrics_haproxy_exports() -> None:
    exported = haproxy_exported_series()
    for panel in panels():
        for target in panel["targets"]:
            unknown = set(re.findall(r"\bhaproxy_\w+", target["expr"])) - exported
            assert not unknown, f"panel {panel['title']!r} queries {unknown}"


def test_every_panel_has_a_title_and_a_query_on_the_provisioned_datasource() -> None:
    (source,) = load_yaml(PROVISIONING / "datasources/prometheus.yml")["datasources"]
    assert source["type"] == "prometheus" and source["uid"]
    ids = [panel["id"] for panel in json.loads(DASHBOARD.read_text())["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["title"].strip(), f"panel {panel['id']} has no title"
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        for owner in [panel, *panel["targets"]]:
            assert owner["datasource"] == {"type": "prometheus", "uid": source["uid"]}, (
                f"panel {panel['title']!r} names another datasource"
            )
            assert owner.get("expr", "x").strip(), f"panel {panel['title']!r} has an empty query"


def test_every_row_is_one_a_test_runs_against_a_real_prometheus() -> None:
    # one Reame's panels here and in test_compose.py; the cluster's (shared tier, HAProxy) in
    # test_compose_cluster.py, where a real HAProxy and Valkey are scraped: a new row needs a
    # test that makes its queries answer
    assert set(rows()) == {SERVER_ROW, CLUSTER_ROW}
    assert all(rows().values())


def mounts(service: dict) -> dict[str, str]:
    """Host path (relative to the repo) to container path of a service's bind mounts."""
    pairs = (volume.split(":")[:2] for volume in service["volumes"])
    return {source.removeprefix("./"): target for source, target in pairs if source[0] in "./"}


def test_grafana_and_prometheus_find_what_compose_mounts() -> None:
    services = load_yaml(COMPOSE_FILE)["services"]
    grafana, prometheus = mounts(services["grafana"]), mounts(services["prometheus"])
    assert grafana["docker/grafana/provisioning"] == "/etc/grafana/provisioning"
    (provider,) = load_yaml(PROVISIONING / "dashboards/reame.yml")["providers"]
    assert provider["options"]["path"] == grafana["docker/grafana/dashboards"]
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{grafana['docker/grafana/dashboards']}/{DASHBOARD.name}"

    (source,) = load_yaml(PROVISIONING / "datasources/prometheus.yml")["datasources"]
    assert source["url"] == "http://prometheus:9090"
    config_flag = f"--config.file={prometheus['docker/prometheus/prometheus.yml']}"
    assert config_flag in services["prometheus"]["command"]
    jobs = {job["job_name"]: job for job in load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]}
    assert jobs["reame"]["static_configs"] == [{"targets": ["reame:8000"]}]
    assert all(job.get("metrics_path", "/metrics") == "/metrics" for job in jobs.values())
    # the cluster profile's services, found by name through Docker's DNS
    found = {
        job["dns_sd_configs"][0]["names"][0]: name for name, job in jobs.items() if name != "reame"
    }
    assert {"replica", "haproxy"} == set(found) and {"replica", "haproxy"} <= set(services)
    assert load_yaml(PROMETHEUS_CONFIG)["global"]["scrape_interval"] == "5s"


def test_the_shipped_prometheus_config_is_valid() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("needs promtool: apt-get install prometheus (it ships /usr/bin/promtool)")
    result = subprocess.run(
        [promtool, "check", "config", str(PROMETHEUS_CONFIG)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- compose.yaml, checked by Docker Compose itself (no Docker engine needed) -------------------


def test_compose_file_is_valid() -> None:
    result = compose("config", "-q")
    assert result.returncode == 0, result.stderr


def test_monitoring_is_an_opt_in_profile() -> None:
    bare = compose("config", "--services")
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.split() == ["reame"]
    full = compose("--profile", "monitoring", "config", "--services")
    assert full.returncode == 0, full.stderr
    assert sorted(full.stdout.split()) == ["grafana", "prometheus", "reame"]
