"""`reame bench --load` and `--soak`: the seeded mix, the figures and verdicts without a server,
then one short real load and one short soak of a real `reame serve`."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from reame.api.schemas import ChatRequest
from reame.errors import ConfigError
from reame_bench.load_client import Outcome
from reame_bench.load_mix import (
    DROP,
    KINDS,
    LOAD_WEIGHTS,
    MALFORMED,
    SESSION,
    SOAK_WEIGHTS,
    TOO_LARGE,
    TOO_LONG,
    MixShape,
    plan,
)
from reame_bench.load_report import as_table, percentile, summarize
from reame_bench.serve_process import require_loopback
from reame_bench.soak_plot import Sample
from reame_bench.soak_runner import sample_times, verdicts
from reame_command import reame_command

SHAPE = MixShape("smollm2-135m", max_body_bytes=256 * 1024, context_tokens=2048)


def test_the_same_seed_gives_the_same_requests_and_another_seed_others() -> None:
    first = [plan(3, i, SHAPE) for i in range(50)]
    assert first == [plan(3, i, SHAPE) for i in range(50)]
    assert first != [plan(4, i, SHAPE) for i in range(50)]


@pytest.mark.parametrize("weights", [LOAD_WEIGHTS, SOAK_WEIGHTS])
def test_every_kind_comes_in_about_its_share(weights: dict[str, int]) -> None:
    n = 4000
    counts = Counter(plan(0, i, SHAPE, weights).kind for i in range(n))
    assert set(counts) == set(KINDS)
    total = sum(weights.values())
    for kind, weight in weights.items():
        assert abs(counts[kind] / n - weight / total) < 0.025, (kind, counts[kind])


def test_real_requests_are_valid_chats_and_the_malformed_ones_are_not() -> None:
    for i in range(400):
        p = plan(1, i, SHAPE)
        if p.kind == MALFORMED:
            with pytest.raises((ValueError, ValidationError)):
                ChatRequest.model_validate(json.loads(p.content.decode()))
            continue
        body = ChatRequest.model_validate(json.loads(p.content))
        assert body.stream == p.is_stream
        if p.kind == TOO_LARGE:
            assert len(p.content) > SHAPE.max_body_bytes
        else:
            assert len(p.content) < SHAPE.max_body_bytes
        if p.kind == TOO_LONG:
            assert len(body.messages[0].content.split()) > SHAPE.context_tokens
        if p.kind == DROP:
            assert p.is_stream and p.drop_after >= 1 and body.ignore_eos
        if p.kind == SESSION:
            assert body.session_id in {f"load-1-{k}" for k in range(SHAPE.num_sessions)}


def test_a_context_too_long_for_the_body_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="would not fit"):
        MixShape("m", max_body_bytes=64 * 1024, context_tokens=8192)


def test_only_this_machine_is_a_target() -> None:
    assert require_loopback("http://127.0.0.1:8000")
    assert require_loopback("localhost:8000")
    with pytest.raises(ConfigError, match="only target this machine"):
        require_loopback("http://10.0.0.5:8000")


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([], 50) is None


def test_the_checks_catch_5xx_a_429_without_retry_after_and_broken_streams() -> None:
    outcomes = [
        Outcome("chat", 200, 0.5),
        Outcome("chat", 429, 0.01, retry_after="1"),
        Outcome("stream", 200, 0.4, ttft=0.1),
        Outcome("drop", 200, 0.2, ttft=0.1, is_dropped=True),
        Outcome("too_large", 413, 0.01),
    ]
    good = summarize(outcomes)
    good.freed_after_s, good.answers_after = 0.1, True
    assert good.ok and good.num_429 == 1 and good.kinds["drop"].dropped == 1
    assert good.kinds["chat"].p50_s == 0.5  # the 429 is left out of the latency
    bad = summarize(
        [
            *outcomes,
            Outcome("chat", 500, 0.1),
            Outcome("chat", 429, 0.01),
            Outcome("stream", 200, 0.3, problem="the stream ended without data: [DONE]"),
            Outcome("malformed", 200, 0.1),
            Outcome("chat", None, 0.1, problem="ReadError", is_connection_error=True),
        ]
    )
    bad.freed_after_s, bad.answers_after = None, True
    failed = {name for name, ok in bad.checks().items() if not ok}
    assert len(failed) == 6, failed
    assert "| chat |" in as_table({}, bad)


def test_soak_samples_every_interval_and_at_the_end() -> None:
    assert sample_times(6, 3) == [0, 3, 6]
    assert sample_times(7, 3) == [0, 3, 6, 7]


def sample(t: float, rss: float, fds: int = 20, threads: int = 10, stores: float = 0) -> Sample:
    return Sample(t, rss, fds, threads, 0.0, 0.0, stores, 0, 0)


def test_flat_means_the_last_third_stays_near_the_first_and_counts_stay_put() -> None:
    warm = [sample(0, 300), sample(1, 400), sample(2, 405), sample(3, 410), sample(4, 420)]
    assert all(v.is_flat is not False for v in verdicts(warm))
    leak = [*warm[:4], sample(4, 600, fds=40, threads=30)]
    leaking = {v.series for v in verdicts(leak) if v.is_flat is False}
    assert leaking == {"rss_beyond_stores_mb", "fds", "threads"}


def test_rss_that_grows_with_the_budgeted_stores_alone_is_flat() -> None:
    filling = [sample(t, 400 + 50 * t, stores=50 * t) for t in range(6)]  # sessions filling up
    assert all(v.is_flat is not False for v in verdicts(filling))


@pytest.mark.model
def test_a_short_load_gives_no_5xx_429s_with_retry_after_and_frees_the_slots() -> None:
    result = reame_command(
        "bench", "--load", "--clients", "64", "--requests", "150", "--seconds", "75", "--json",
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["num_5xx"] == 0 and report["server_5xx"] == 0
    assert report["num_429"] > 0 and report["num_429_without_retry_after"] == 0
    assert report["freed_after_s"] is not None and report["answers_after"]
    assert report["sent"] == 150 and set(report["kinds"]) == set(KINDS)


@pytest.mark.model
def test_a_short_soak_writes_its_csv_and_plot(tmp_path: Path) -> None:
    result = reame_command(
        "bench", "--soak", "--minutes", "0.1", "--interval", "3", "--out", str(tmp_path),
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    with (tmp_path / "soak.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and all(float(r["rss_mb"]) > 0 for r in rows)
    assert (tmp_path / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| rss_mb |" in result.stdout
