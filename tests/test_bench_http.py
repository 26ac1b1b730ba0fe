"""`reame bench --url` without a server or a model: SSE reading, the arithmetic, the workloads'
order and prompts on a scripted target, and the report."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest

from reame.errors import ConfigError
from reame_bench.http_report import as_dict, as_json, as_table
from reame_bench.http_runner import (
    METRICS,
    PREFILL,
    SCALING,
    TTFT,
    HttpFigures,
    aggregate_key,
    aggregate_tps,
    bench_targets,
    decode_chats,
    exact_check,
    prefill_tps,
    summarize,
)
from reame_bench.sse_reader import BenchTargetError, ChunkTally, SseDecoder, read_stream
from reame_bench.targets import Messages, Timeline, api_base, chat_request_body, target_names
from reame_bench.workloads import filler_text, topics


def chunk(content: str | None = None, usage: dict | None = None, role: bool = False) -> str:
    delta: dict = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    body: dict = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    if usage is not None:
        body = {"object": "chat.completion.chunk", "choices": [], "usage": usage}
    return f"data: {json.dumps(body)}\n\n"


USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
BODY = (
    ": keepalive\n\n"
    + chunk(role=True, content="")
    + chunk("Hel")
    + ": ping\n\n"
    + chunk("lo")
    + chunk("!")
    + chunk(usage=USAGE)
    + "data: [DONE]\n\n"
)


class Clock:
    """One tick per reading, so each chunk's arrival is known."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


async def pieces(parts: Sequence[str], read: list[str] | None = None) -> AsyncIterator[str]:
    for part in parts:
        if read is not None:
            read.append(part)
        yield part


def read(parts: Sequence[str], clock: Clock | None = None) -> Timeline:
    return asyncio.run(read_stream(pieces(parts), Timeline(0.0), clock or Clock()))


# --- SSE --------------------------------------------------------------------------------------


def test_sse_decoder_returns_data_and_drops_comments_and_other_fields() -> None:
    decoder = SseDecoder()
    text = ": keepalive\n\nevent: message\nid: 3\ndata: one\n\ndata:two\ndata:  three\n\n"
    assert decoder.feed(text) == ["one", "two\n three"]
    assert decoder.finish() == []


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_sse_decoder_joins_lines_split_anywhere_across_reads(eol: str) -> None:
    text = f"data: first{eol}{eol}: ping{eol}{eol}data: second{eol}{eol}"
    for cut in range(len(text) + 1):
        decoder = SseDecoder()
        events = decoder.feed(text[:cut]) + decoder.feed(text[cut:]) + decoder.finish()
        assert events == ["first", "second"], (eol, cut)


def test_sse_decoder_keeps_an_unterminated_last_event_at_the_end() -> None:
    decoder = SseDecoder()
    assert decoder.feed("data: [DONE]") == []
    assert decoder.finish() == ["[DONE]"]


def test_a_stream_gives_first_content_time_and_usage_counts() -> None:
    t = read([BODY])
    assert t.num_tokens == 3 and t.num_prompt_tokens == 12
    assert t.first == 1.0 and t.finished == 1.0


def test_a_body_split_at_every_point_reads_the_same() -> None:
    whole = read([BODY])
    for cut in range(len(BODY) + 1):
        t = read([BODY[:cut], BODY[cut:]])
        assert (t.num_tokens, t.num_prompt_tokens) == (whole.num_tokens, 12), cut


def test_first_is_the_first_chunk_with_content_not_the_role_chunk() -> None:
    parts = [": keepalive\n\n", chunk(role=True, content=""), chunk("a"), chunk("b")]
    t = read([*parts, chunk(usage=USAGE), "data: [DONE]\n\n"])
    # readings: 1 keepalive, 2 role chunk, 3 "a", then the end
    assert t.first == 3.0
    assert t.finished == 6.0
    assert t.token_times == [3.0, 4.0]  # "a" and "b": the role chunk carries no token


def test_without_usage_content_chunks_are_counted() -> None:
    t = read([chunk(role=True), chunk("a"), chunk(""), chunk("b"), chunk("c"), "data: [DONE]\n\n"])
    assert t.num_tokens == 3 and t.num_prompt_tokens == 0


def test_reasoning_content_counts_as_content() -> None:
    body = {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}
    t = read([f"data: {json.dumps(body)}\n\n", chunk("x"), "data: [DONE]\n\n"])
    assert t.first == 1.0 and t.num_tokens == 2


def test_reading_stops_at_done() -> None:
    seen: list[str] = []
    parts = [chunk("a"), "data: [DONE]\n\n", chunk("never read")]
    t = asyncio.run(read_stream(pieces(parts, seen), Timeline(0.0), Clock()))
    assert seen == parts[:2] and t.num_tokens == 1


def test_a_stream_ending_without_done_or_content_still_finishes() -> None:
    t = read([chunk(role=True), chunk(usage={"completion_tokens": 1, "prompt_tokens": 4})])
    assert t.num_tokens == 1 and t.first == t.finished


def test_an_error_chunk_or_a_non_json_chunk_fails_the_target() -> None:
    with pytest.raises(BenchTargetError, match="mid-stream"):
        read([chunk("a"), 'data: {"error": {"message": "slot unavailable"}}\n\n'])
    with pytest.raises(BenchTargetError, match="not a JSON object"):
        read(["data: <html>\n\n"])


def test_chunks_after_done_are_ignored_by_the_tally() -> None:
    tally = ChunkTally(Timeline(0.0))
    for payload in ('{"choices": [{"delta": {"content": "a"}}]}', "[DONE]", "not json"):
        tally.add(payload, 1.0)
    assert tally.finish(2.0).num_tokens == 1


# --- arithmetic -------------------------------------------------------------------------------


def test_single_stream_decode_is_tokens_after_the_first_over_their_time() -> None:
    t = Timeline(submitted=0.0, first=0.5, finished=2.5, num_tokens=41)
    assert aggregate_tps([t]) == pytest.approx(20.0)
    assert t.ttft == pytest.approx(0.5)


def test_aggregate_decode_counts_only_the_time_every_stream_was_decoding() -> None:
    # one chunk a second; the second stream starts late (its prefill came after the first's
    # first token): the window is [2, 5], from its first token to the first stream's last
    early = Timeline(0.0, first=1.0, finished=5.5, num_tokens=5, token_times=[1.0, 2, 3, 4, 5])
    late = Timeline(0.0, first=2.0, finished=7.5, num_tokens=6, token_times=[2.0, 3, 4, 5, 6, 7])
    assert aggregate_tps([early, late]) == pytest.approx((3 + 3) / 3.0)


def test_chunks_of_several_tokens_count_as_the_tokens_the_usage_reports() -> None:
    # the first chunk is the first token; the two after it share the other 8
    t = Timeline(0.0, first=1.0, finished=3.5, num_tokens=9, token_times=[1.0, 2.0, 3.0])
    assert aggregate_tps([t]) == pytest.approx(8 / 2.0)
    assert t.tokens_between(0.0, 3.0) == pytest.approx(9)


def test_without_chunk_times_tokens_are_spread_evenly_up_to_the_finish() -> None:
    group = [
        Timeline(0.0, first=1.0, finished=5.0, num_tokens=21),
        Timeline(0.0, first=2.0, finished=6.0, num_tokens=21),
    ]
    # window [2, 5]: 3/4 of each stream's 20 tokens after its first
    assert aggregate_tps(group) == pytest.approx((15 + 15) / 3.0)


def test_a_stream_with_no_tokens_after_its_first_is_an_error_not_a_division_by_zero() -> None:
    with pytest.raises(BenchTargetError, match="ignore_eos"):
        aggregate_tps([Timeline(0.0, first=1.0, finished=1.0, num_tokens=1)])
    apart = [
        Timeline(0.0, first=1.0, finished=2.0, num_tokens=3, token_times=[1.0, 1.5, 2.0]),
        Timeline(0.0, first=3.0, finished=4.0, num_tokens=3, token_times=[3.0, 3.5, 4.0]),
    ]
    with pytest.raises(BenchTargetError, match="never decoded together"):
        aggregate_tps(apart)


def test_prefill_uses_the_reported_prompt_tokens_else_the_approximation() -> None:
    t = Timeline(0.0, first=0.5, finished=0.6, num_tokens=1, num_prompt_tokens=520)
    assert prefill_tps(t, 512) == pytest.approx(1040.0)
    t.num_prompt_tokens = 0
    assert prefill_tps(t, 512) == pytest.approx(1024.0)


def test_ratios_are_medians_of_per_run_pairs_not_ratios_of_medians() -> None:
    samples = {"m": {"a": [1.0, 4.0, 10.0], "b": [4.0, 4.0, 40.0], "c": [2.0, 2.0, 20.0]}}
    figures = summarize(samples, ["a", "b", "c"])
    assert figures.rows["m"] == {"a": 4.0, "b": 4.0, "c": 2.0}
    # per run, b/a is 4, 1, 4 and c/a is 2, 0.5, 2: the medians of the medians would say 1 and 0.5
    assert figures.ratios["m"] == {"b": 4.0, "c": 2.0}


def test_the_first_target_has_no_ratio() -> None:
    figures = summarize({"m": {"only": [1.0, 3.0]}}, ["only"])
    assert figures.rows["m"] == {"only": 2.0} and figures.ratios["m"] == {}
    assert figures.baseline == "only"


# --- the workloads, on a scripted target ------------------------------------------------------


@dataclass
class Call:
    target: str
    content: str
    max_tokens: int


@dataclass
class ScriptedTarget:
    """Answers at a fixed pace without a server: prefill at `prompt_rate` tokens/s (one token a
    word); n streams of one gather decode together at `decode_rate * n ** batch_gain` in all."""

    name: str
    prompt_rate: float
    decode_rate: float
    calls: list[Call]
    batch_gain: float = 0.0
    short_by: int = 0
    detail: str = "scripted"
    in_flight: list[int] = field(default_factory=list)

    async def stream(self, messages: Messages, max_tokens: int) -> Timeline:
        (message,) = messages
        self.calls.append(Call(self.name, message["content"], max_tokens))
        self.in_flight.append(1)
        await asyncio.sleep(0)  # let the rest of a gather arrive: they decode together
        together = len(self.in_flight)
        await asyncio.sleep(0)
        self.in_flight.clear()
        words = len(message["content"].split())
        # the streams of a gather start decoding together, after the longest prompt
        ttft = (words if max_tokens == 1 else 20) / self.prompt_rate
        num_tokens = max_tokens - (self.short_by if max_tokens > 1 else 0)
        decode = (num_tokens - 1) * together / (self.decode_rate * together**self.batch_gain)
        return Timeline(100.0, 100.0 + ttft, 100.0 + ttft + decode, num_tokens, words)

    async def aclose(self) -> None:
        pass


def scripted(short_by: int = 0) -> tuple[list[ScriptedTarget], list[Call]]:
    calls: list[Call] = []
    targets = [
        ScriptedTarget("fast", 1000.0, 50.0, calls),
        ScriptedTarget("slow", 500.0, 25.0, calls, batch_gain=0.5, short_by=short_by),
    ]
    return targets, calls


def test_every_target_gets_the_same_workloads_in_turn_with_a_cold_prompt_each_run() -> None:
    targets, calls = scripted()
    logged: list[str] = []
    asyncio.run(
        bench_targets(targets, runs=2, prompt_tokens=64, max_tokens=9, log=logged.append, seed=7)
    )
    prefill = [c for c in calls if c.max_tokens == 1]
    assert [c.target for c in prefill] == ["fast", "slow", "slow", "fast"]  # taking turns
    runs = [prefill[0].content, prefill[2].content]
    assert runs == [filler_text(seed=7, num_words=64), filler_text(seed=8, num_words=64)]
    assert prefill[0].content == prefill[1].content  # the same prompt for every target
    warm = [c for c in calls if c.max_tokens == 4]
    assert all(c.content not in runs for c in warm)  # the warm-up leaves the runs cold
    decode = [c for c in calls if c.max_tokens == 9]
    assert len(decode) == 2 * 2 * (1 + 2 + 4)
    assert {c.content for c in decode} == {
        m[0]["content"] for r in (0, 1) for m in decode_chats(7, r)
    }
    first, second = decode_chats(7, 0), decode_chats(7, 1)
    assert all(a[0]["content"].endswith(q) for a, q in zip(first, topics(4), strict=True))
    assert not {m[0]["content"] for m in first} & {m[0]["content"] for m in second}
    assert all(c.content not in {m[0]["content"] for m in first} for c in warm)
    assert logged and logged[0].startswith("warm-up")


def test_the_figures_follow_from_the_timelines() -> None:
    targets, _ = scripted()
    figures = asyncio.run(bench_targets(targets, 3, 64, 9, lambda _: None, 7))
    assert figures.targets == ["fast", "slow"]
    assert set(figures.rows) == set(METRICS)
    assert figures.rows[TTFT]["fast"] == pytest.approx(64 / 1000)
    assert figures.rows[PREFILL] == pytest.approx({"fast": 1000.0, "slow": 500.0})
    assert figures.ratios[PREFILL]["slow"] == pytest.approx(0.5)
    assert figures.ratios[TTFT]["slow"] == pytest.approx(2.0)
    for n in (1, 2, 4):
        assert figures.rows[aggregate_key(n)] == pytest.approx({"fast": 50.0, "slow": 25 * n**0.5})
        assert figures.ratios[aggregate_key(n)]["slow"] == pytest.approx(0.5 * n**0.5)
    assert figures.rows[SCALING] == pytest.approx({"fast": 1.0, "slow": 2.0})
    assert figures.ratios[SCALING]["slow"] == pytest.approx(2.0)
    assert figures.checks == {exact_check("fast"): True, exact_check("slow"): True}


def test_a_target_that_stops_short_fails_its_check() -> None:
    targets, _ = scripted(short_by=2)
    figures = asyncio.run(bench_targets(targets, 1, 16, 9, lambda _: None, 7))
    assert figures.checks == {exact_check("fast"): True, exact_check("slow"): False}


# --- naming and requests ----------------------------------------------------------------------


def test_a_server_can_be_named_by_host_port_or_base_url() -> None:
    for url in ("localhost:8080", "http://localhost:8080/", "http://localhost:8080/v1/"):
        assert api_base(url) == "http://localhost:8080"
    assert api_base("https://box/proxy/v1") == "https://box/proxy"


def test_target_names_default_to_host_port_and_must_differ() -> None:
    urls = ["http://127.0.0.1:8000", "http://127.0.0.1:8080/v1"]
    assert target_names(urls, [], False) == ["127.0.0.1:8000", "127.0.0.1:8080"]
    assert target_names(urls, ["reame"], True) == ["reame", "127.0.0.1:8080"]
    with pytest.raises(ConfigError, match="must differ"):
        target_names(urls, ["x", "x"], False)
    with pytest.raises(ConfigError, match="must differ"):
        target_names(urls[:1], ["in-process"], True)
    with pytest.raises(ConfigError, match="at most one per --url"):
        target_names(urls[:1], ["a", "b"], False)


def test_the_request_is_greedy_streamed_with_usage_and_ignores_eos() -> None:
    body = chat_request_body("m", [{"role": "user", "content": "hi"}], 7)
    assert body["model"] == "m" and body["max_tokens"] == 7 and body["temperature"] == 0
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True


# --- the report -------------------------------------------------------------------------------


def report_figures() -> tuple[dict, HttpFigures]:
    targets, _ = scripted()
    targets.append(ScriptedTarget("third", 250.0, 10.0, []))
    figures = asyncio.run(bench_targets(targets, 1, 16, 5, lambda _: None, 7))
    header = {"target fast": "scripted", "runs": 1, "prompt_tokens": 16, "max_tokens": 5}
    return header, figures


def test_the_table_has_every_metric_target_and_ratio_column() -> None:
    header, figures = report_figures()
    table = as_table(header, figures)
    lines = table.splitlines()
    assert lines[0] == "targets: fast, slow, third (ratios against fast)"
    assert "same model" in table and "threads" in table and "parallel slots" in table
    columns = next(line for line in lines if line.startswith("metric")).split()
    assert columns == ["metric", "fast", "slow", "third", "slow/fast", "third/fast"]
    for metric in METRICS:
        row = next(line for line in lines if line.startswith(metric))
        assert len(row[len(metric) :].split()) == 5, row
    assert "yes  fast: every request generated exactly max_tokens tokens" in lines
    assert "target fast: scripted" in lines


def test_the_json_has_every_metric_for_every_target() -> None:
    header, figures = report_figures()
    report = json.loads(as_json(header, figures))
    assert report == json.loads(json.dumps(as_dict(header, figures)))
    assert report["targets"] == ["fast", "slow", "third"] and report["baseline"] == "fast"
    assert report["max_tokens"] == 5
    for metric in METRICS:
        assert set(report["figures"][metric]) == {"fast", "slow", "third"}
        assert set(report["ratios"][metric]) == {"slow", "third"}
        assert all(v > 0 for v in report["figures"][metric].values())
    assert all(report["checks"].values())


# --- the command line -------------------------------------------------------------------------


def test_the_flags_parse_and_in_process_needs_a_url(capsys: pytest.CaptureFixture) -> None:
    from reame.cli.main import main
    from reame_bench.cli.main import build_parser

    args = build_parser().parse_args(
        ["--url", "a:1", "--url", "b:2", "--name", "x", "--api-key", "k", "--in-process"]
    )
    assert args.url == ["a:1", "b:2"] and args.name == ["x"] and args.api_key == "k"
    assert args.in_process
    assert main(["bench", "--in-process"]) == 2
    assert "--url" in capsys.readouterr().err


def test_the_http_bench_imports_neither_llama_cpp_nor_sanic() -> None:
    code = (
        "import sys, reame_bench.http_runner, reame_bench.http_report; "
        "print(sorted(m for m in ('llama_cpp', 'sanic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_prefix_openings_share_their_first_words_and_differ_after() -> None:
    from reame_bench.prefix_runner import openings

    for label, qs in openings(6).items():
        assert len(set(qs)) == 6, label
        head = qs[0].split()[0]
        assert all(q.split()[0] == head for q in qs), label
    short, long = openings(6).values()
    assert all(q.startswith("Question ") and len(q.split()) <= 7 for q in short)
    passage = long[0].split(" Question: ")[0]
    assert len(passage.split()) == 120 and all(q.startswith(passage) for q in long)
