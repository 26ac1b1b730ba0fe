"""`reame bench --cluster`: its workload and arithmetic without servers, then the whole bench
end to end on small sizes (real replicas, redis-server and HAProxy on 127.0.0.1)."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys

import pytest

from reame_bench.cluster_client import Counters
from reame_bench.cluster_processes import SERVER_HEADER, render_haproxy
from reame_bench.cluster_projection import Measured, project
from reame_bench.cluster_workload import (
    Answer,
    chat_workload,
    hit_ratio,
    lanes,
    moved_conversations,
    percentile,
    spread,
    warm_up,
)


def answer(conversation: int, replica: str, started: float, prompt: int, cached: int) -> Answer:
    return Answer(conversation, 1, replica, started, started / 10, prompt, cached)


def test_the_workload_puts_conversations_behind_their_system_prompts() -> None:
    work = chat_workload(num_systems=3, num_conversations=7, turns=2, system_words=40, seed=1)
    assert [c.system for c in work[:3]] == [c.system for c in work[3:6]]
    assert len({c.system for c in work}) == 3
    questions = [q for c in work for q in c.questions]
    assert len(questions) == 14 and len(set(questions)) == 14
    assert work == chat_workload(3, 7, 2, 40, seed=1)
    assert work != chat_workload(3, 7, 2, 40, seed=2)


def test_lanes_share_the_conversations_out() -> None:
    assert lanes(7, 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert sorted(k for lane in lanes(16, 4) for k in lane) == list(range(16))


def test_the_hit_ratio_weighs_answers_by_their_prompt_tokens() -> None:
    answers = [answer(0, "r1", 0, 1000, 900), answer(1, "r1", 1, 100, 0)]
    assert hit_ratio(answers) == pytest.approx(900 / 1100)
    assert hit_ratio([]) == 0.0


def test_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == statistics.median(values)
    assert percentile(values, 95) == pytest.approx(95.05)
    assert percentile([3.0], 95) == 3.0


def test_spread_and_conversations_that_moved() -> None:
    answers = [answer(0, "r1", 0, 1, 0), answer(0, "r2", 1, 1, 0), answer(1, "r2", 2, 1, 0)]
    assert spread(answers) == {"r1": 1, "r2": 2}
    assert moved_conversations(answers) == 1


def test_warm_up_counts_the_replicas_answers_after_it_joined_in_windows() -> None:
    answers = [answer(k, "r2", float(k), 100, 10 * k) for k in range(7)]
    answers.append(answer(9, "r1", 5.0, 100, 100))
    windows = warm_up(answers, "r2", since=2.0, size=2)
    assert [(w.first, w.count) for w in windows] == [(1, 2), (3, 2), (5, 1)]
    assert windows[0].hit_ratio == pytest.approx((20 + 30) / 200)
    assert windows[-1].median_ttft == pytest.approx(0.6)


def test_the_projection_scales_bytes_and_their_stages_but_not_the_round_trip() -> None:
    small = Measured(0.2, 1530, 1514, 30e6, 0.001, 0.06, 0.04, 0.003)
    big = project(small, kv_ratio=2.0, prefill_tokens_per_s=25.0, link_bytes_per_s=125e6,
                  from_network=True)  # fmt: skip
    assert big.bytes_moved == 60e6 and big.fetch == pytest.approx(0.12)
    assert big.lookup == 0.001 and big.computed == pytest.approx(16 / 25)
    assert big.fetch_over_link == pytest.approx(60e6 / 125e6)
    assert big.ttft == pytest.approx(0.001 + 0.48 + 0.08 + 0.006 + 16 / 25)
    anchored = project(small, 2.0, 25.0, None, False, warm_s=2.2)
    assert anchored.computed == 2.2 and anchored.fetch_over_link is None
    cold = project(Measured(7.0, 1530, 0, 0, 0.001, 0, 0, 0), 2.0, 25.0, 125e6, False, 2.2)
    assert cold.ttft == pytest.approx(0.001 + 1530 / 25) and cold.fetch_over_link is None


def test_haproxy_is_rendered_with_the_replicas_and_a_header_naming_who_answered() -> None:
    shipped = "backend b\n    default-server check inter 2s\n    server-template r 1-8 x:1\n"
    shipped += "frontend f\n    bind :8000\n"
    out = render_haproxy(shipped, ["127.0.0.1:1", "127.0.0.1:2"], {":8000": 9}, "300ms", True)
    assert f"    http-response set-header {SERVER_HEADER} %s" in out
    assert "    server r1 127.0.0.1:1\n    server r2 127.0.0.1:2\n" in out
    assert "bind 127.0.0.1:9" in out and "inter 300ms" in out and "server-template" not in out


def test_counters_sum_the_series_that_carry_the_labels() -> None:
    before = Counters({'x_total{result="ram"}': 1.0, 'x_sum{stage="fetch",tier="disk"}': 0.5})
    after = Counters(
        {'x_total{result="ram"}': 3.0, 'x_total{result="miss"}': 1.0,
         'x_sum{stage="fetch",tier="disk"}': 0.75, "x_total_other": 9.0}
    )  # fmt: skip
    assert after.since(before, "x_total", result="ram") == 2.0
    assert after.total("x_total") == 4.0
    assert after.since(before, "x_sum", tier="disk", stage="fetch") == 0.25


def test_the_bench_end_to_end_on_small_sizes() -> None:
    for program in ("redis-server", "haproxy"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed")
    out = subprocess.run(
        [sys.executable, "-m", "reame.cli.main", "bench", "--cluster", "--json", "--runs", "1",
         "--cluster-parts", "stages,replacement", "--conversations", "4", "--system-prompts",
         "1", "--turns", "3", "--system-words", "200", "--clients", "2", "--threads", "1"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    stages = {tier: runs[0] for tier, runs in report["stages"].items()}
    assert [stages[t]["source"] for t in ("cold", "shared", "disk", "ram")] == [
        "miss", "shared", "disk", "ram"
    ]  # fmt: skip
    for tier in ("shared", "disk", "slot", "ram"):
        assert stages[tier]["cached_tokens"] >= 1500
    assert stages["shared"]["bytes_moved"] > 0 and stages["shared"]["fetch"] > 0
    assert stages["ram"]["restore"] > 0 and stages["ram"]["bytes_moved"] == 0
    replaced = report["scenarios"]["route key, shared tier, r2 replaced mid-run"][0]
    assert replaced["failures"] == [] and replaced["replaced_at"] is not None
    assert len(replaced["answers"]) == 12
