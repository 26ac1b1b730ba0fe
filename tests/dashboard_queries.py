"""The provisioned dashboard's queries, run against a real Prometheus, and the traffic that makes
every one of them return data. Shared by the host test (test_dashboard.py) and the compose tests:
test_compose.py checks one Reame's panels (those above every row), test_compose_cluster.py the
row "Cluster" (the shared tier and HAProxy)."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import httpx
from openai import OpenAI

DASHBOARD = Path(__file__).parents[1] / "docker/grafana/dashboards/reame.json"
MODEL = "smollm2-135m"
# NOTE: windows longer than the traffic takes, so that every rate and ratio spans all of it
GRAFANA_VARIABLES = {"$__rate_interval": "2m", "$__range": "10m"}

SHOP = [
    {
        "role": "system",
        "content": "You are a careful assistant for a hardware shop. "
        + " ".join(f"Rule {i}: answer briefly and name the aisle of item {i}." for i in range(40)),
    },
    {"role": "user", "content": "Where are the screws?"},
]
FRUITS = [{"role": "user", "content": "List ten fruits, one a line, numbered."}]


SERVER_ROW, CLUSTER_ROW = "", "Cluster"


def rows() -> dict[str, list[dict]]:
    """Each row's title to the query panels under it ("" for those above every row), as an
    expanded dashboard lays them out: a row holds the panels that follow it."""
    found: dict[str, list[dict]] = {SERVER_ROW: []}
    title = SERVER_ROW
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        if panel["type"] == "row":
            title = panel["title"]
            found[title] = []
        else:
            found[title].append(panel)
    return found


def panels(row: str | None = None) -> list[dict]:
    """The query panels of one row, or of all."""
    if row is not None:
        return rows()[row]
    return [panel for row_panels in rows().values() for panel in row_panels]


def grafana_expr(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"a Grafana variable the test does not know: {expr}"
    return expr


def chat(client: OpenAI, messages: list[dict], **extra: object) -> None:
    client.chat.completions.create(model=MODEL, messages=messages, temperature=0, **extra)


def drive_traffic(client: OpenAI) -> None:
    """Requests that make every series of the dashboard exist, once SHOP's prefix is on disk
    (a server that answered it once and stopped): a prefix found on disk, in RAM and nowhere,
    drafts from the archive and from a list's form, an answer from memory, a stream, a session
    and a best-of-N vote."""
    computed = {"answer_memory": False}  # NOTE: asked again, yet computed again
    for _ in range(2):  # restored from the disk tier, then from RAM
        chat(client, SHOP, max_tokens=12, extra_body=computed)
    for _ in range(2):  # a miss, then drafts from the Palimpsest and Il Suggeritore
        chat(client, FRUITS, max_tokens=40, extra_body=computed)
    for _ in range(2):  # kept in the answer memory, then answered from it
        chat(client, FRUITS, max_tokens=20)
    stream = client.chat.completions.create(
        model=MODEL, messages=FRUITS, temperature=0, max_tokens=16, stream=True
    )
    assert list(stream)
    chat(client, FRUITS, max_tokens=8, extra_body={"session_id": "dashboard"})
    client.completions.create(
        model=MODEL, prompt="7 + 5 =", best_of=3, temperature=0.7, seed=3, max_tokens=8
    )


def wait_for_a_scrape(url: str, wait: float = 120) -> None:
    """Until Prometheus has scraped every target that is up as it is now, so that the traffic
    that follows shows as an increase and not as the counters' first values, and the traffic
    before it is in the samples."""
    since = time.time()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        # NOTE: timestamp() of a selector, not of `up == 1`: an operator's result carries the
        # query's time, which is always after `since`, so the wait would end at once
        query = {"query": "timestamp(up) and up == 1"}
        body = httpx.get(f"{url}/api/v1/query", params=query, timeout=10)
        # NOTE: every target, not any: with two replicas and HAProxy, one of them scraped
        # does not put the other's traffic in the samples
        scraped = [float(s["value"][1]) > since for s in body.json()["data"]["result"]]
        if scraped and all(scraped):
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus at {url} did not scrape the server within {wait} s")


def why_no_data(url: str, expr: str, legend: str) -> str | None:
    """None when the query returns a number, else what is wrong with it."""
    body = httpx.get(f"{url}/api/v1/query", params={"query": grafana_expr(expr)}, timeout=10)
    if body.status_code != 200 or body.json()["status"] != "success":
        return f"error {body.text}"
    result = body.json()["data"]["result"]
    if not result:
        return "no series"
    if all(math.isnan(float(series["value"][1])) for series in result):
        return f"only NaN: {result}"
    # a `sum by (label)` over a label the metric does not have still returns one series
    for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend):
        if any(label not in series["metric"] for series in result):
            return f"no label {label!r} for the legend: {result}"
    return None


def panels_without_data(url: str, wait: float = 60, row: str = SERVER_ROW) -> str:
    """'' once every query of the row's panels returns data (waiting up to `wait` s for scrapes
    and the prefix cache's disk write), else one line per failing query."""
    targets = [
        (p["title"], t["expr"], t.get("legendFormat", ""))
        for p in panels(row)
        for t in p["targets"]
    ]
    deadline = time.monotonic() + wait
    while True:
        failing = [
            (title, expr, why)
            for title, expr, legend in targets
            if (why := why_no_data(url, expr, legend))
        ]
        if not failing or time.monotonic() > deadline:
            break
        time.sleep(1)
    return "\n".join(f"  {title!r}: {expr}\n    -> {why}" for title, expr, why in failing)
