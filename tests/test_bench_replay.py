"""`reame bench --replay`: its traces, the messages built from earlier answers, the report's
arithmetic and tables and the plots, without servers; then the bench end to end on small sizes
against real `reame serve` children (and llama-server where it is built)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from reame_bench.replay_plot import cost_png, overlap_png
from reame_bench.replay_report import (
    Record,
    figures,
    markdown,
    modes,
    overlap_figures,
    run_figures,
    trace_table,
    window_size,
    windows,
)
from reame_bench.replay_servers import llama_server_command
from reame_bench.replay_traces import (
    AGENT_TURNS,
    OVERLAPS,
    RAG_BLOCK,
    RAG_CHUNKS,
    RETRIEVAL_POOL,
    RETRIEVAL_TOP,
    TRACES,
    Call,
    Reply,
    build_trace,
    lane_requests,
    next_messages,
    request_body,
)
from reame_bench.sse_reader import ChunkTally
from reame_bench.targets import Timeline
from reame_command import reame_command
from server_process import small_server

LLAMA_SERVER = Path("/opt/llama-build/bin/llama-server")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# NOTE: the caller's REAME_* variables (CI sets REAME_WHEELS_DIR) are no settings of the bench
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("REAME_")}


def test_traces_are_the_same_for_a_seed_and_differ_for_another() -> None:
    for name in TRACES:
        trace = build_trace(name, 30, 4, 120, seed=1)
        assert len(trace.requests) == 30
        assert [r.index for r in trace.requests] == list(range(1, 31))
        assert trace == build_trace(name, 30, 4, 120, seed=1)
        assert trace.requests != build_trace(name, 30, 4, 120, seed=2).requests


def test_the_chat_has_more_conversations_than_sequences_behind_one_system_prompt() -> None:
    trace = build_trace("chat", 40, 4, 400, seed=0)
    assert trace.conversations > 4
    firsts = [r for r in trace.requests if r.turn == 1]
    assert len(firsts) == trace.conversations
    assert len({r.new[0]["content"] for r in firsts}) == 1  # the one system prompt
    assert 400 <= len(firsts[0].new[0]["content"].split()) < 440
    # turns interleave: every conversation has its turn before any has the next
    assert [r.conversation for r in trace.requests[:16]] == [*range(8), *range(8)]
    assert all(r.new[-1]["role"] == "user" and len(r.new) == 1 for r in trace.requests[8:])


def test_a_turn_sends_the_history_and_the_answer_the_server_gave() -> None:
    trace = build_trace("chat", 16, 4, 50, seed=0)
    first, second = trace.requests[0], trace.requests[8]
    assert second.conversation == first.conversation and second.turn == 2
    sent = next_messages(first, None, None)
    assert sent == list(first.new)
    again = next_messages(second, sent, Reply("We open at nine."))
    assert again == [*sent, {"role": "assistant", "content": "We open at nine."}, *second.new]


def test_the_agent_feeds_each_tool_result_back_as_the_reply_called_it() -> None:
    trace = build_trace("agent", 2 * AGENT_TURNS, 4, 300, seed=0)
    assert trace.conversations == 2
    first, second = trace.requests[0], trace.requests[1]
    assert first.options["tools"] and first.options == second.options
    assert second.tool_result and not second.new
    sent = next_messages(first, None, None)
    call = Call("call_1", "find_order", '{"customer": "Ann Lund"}')
    tooled = next_messages(second, sent, Reply("", (call,)))
    assert tooled[-2]["tool_calls"][0]["id"] == "call_1" and tooled[-2]["content"] is None
    assert tooled[-1] == {"role": "tool", "tool_call_id": "call_1", "content": second.tool_result}
    # a call cut short by max_tokens cannot go back: the result is told to the user
    cut = Call("call_2", "find_order", '{"customer": "An')
    worded = next_messages(second, sent, Reply("Let me look.", (cut,)))
    expected = 'Let me look. find_order({"customer": "An)'
    assert worded[-2] == {"role": "assistant", "content": expected}
    assert worded[-1] == {"role": "user", "content": f"Tool result: {second.tool_result}"}
    # the next task starts again from its own system prompt and task
    assert trace.requests[AGENT_TURNS].turn == 1 and trace.requests[AGENT_TURNS].conversation == 1


def test_extraction_asks_for_json_by_the_schema_over_different_memos() -> None:
    trace = build_trace("extract", 20, 4, 200, seed=0)
    assert trace.conversations == 20
    systems = {r.new[0]["content"] for r in trace.requests}
    memos = {r.new[1]["content"] for r in trace.requests}
    assert len(systems) == 1 and len(memos) == 20
    body = request_body("m", trace.requests[0], next_messages(trace.requests[0], None, None), 32)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == [
        "name", "age", "city", "job"
    ]  # fmt: skip
    assert body["stream"] and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0 and body["max_tokens"] == 32 and "ignore_eos" not in body


def test_rag_questions_share_the_stated_share_of_passages_with_the_one_before() -> None:
    trace = build_trace("rag", 100, 4, 400, seed=3)
    seen = {level: 0 for level in OVERLAPS}
    for before, now in zip(trace.requests, trace.requests[1:], strict=False):
        assert len(now.chunks) == len(set(now.chunks)) == RAG_CHUNKS
        shared = len(set(before.chunks) & set(now.chunks))
        assert shared == round(now.overlap * RAG_CHUNKS)
        # the shared passages come first, in the same order: a prefix of the prompt
        assert now.chunks[:shared] == before.chunks[:shared]
        seen[now.overlap] += 1
        ask = now.new[1]["content"]
        assert all(f"[{c + 1}] " in ask for c in now.chunks)
        # each question goes alone, not after the one before
        assert next_messages(now, list(before.new), Reply("See [3].")) == list(now.new)
    assert all(count >= 16 for count in seen.values())
    assert trace.conversations == 100 // RAG_BLOCK
    assert {r.turn for r in trace.requests} == set(range(1, RAG_BLOCK + 1))


def test_retrieval_questions_draw_popular_passages_more_often_in_changing_order() -> None:
    trace = build_trace("retrieval", 200, 4, 300, seed=3)
    drawn = [0] * RETRIEVAL_POOL
    for now in trace.requests:
        assert len(now.chunks) == len(set(now.chunks)) == RETRIEVAL_TOP
        assert not now.with_history and now.new[1]["content"].count("\n\n") == RETRIEVAL_TOP
        for c in now.chunks:
            drawn[c] += 1
    assert drawn[0] > 2 * drawn[-1] > 0  # the first passage is the most popular by far
    # a passage shared with the question before sits elsewhere in the prompt often
    pairs = list(zip(trace.requests, trace.requests[1:], strict=False))
    moved = [
        (a, b)
        for a, b in pairs
        if any(c in b.chunks and a.chunks.index(c) != b.chunks.index(c) for c in a.chunks)
    ]
    assert len(moved) > len(pairs) // 4


def test_users_hold_their_own_conversations_in_order() -> None:
    trace = build_trace("chat", 24, 4, 50, seed=0)
    lanes = lane_requests(trace, 3)
    assert [sorted({r.conversation for r in lane}) for lane in lanes] == [[0, 3, 6], [1, 4, 7],
                                                                          [2, 5]]  # fmt: skip
    for lane in lanes:
        assert [r.index for r in lane] == sorted(r.index for r in lane)
    assert sorted(r.index for lane in lanes for r in lane) == list(range(1, 25))


def test_the_stream_keeps_drafts_and_llama_servers_timings() -> None:
    reame = ChunkTally(Timeline(0.0))
    reame.add('{"choices": [{"delta": {"content": "Hi"}}]}', 0.1)
    usage = {"prompt_tokens": 50, "completion_tokens": 10,
             "prompt_tokens_details": {"cached_tokens": 40},
             "completion_tokens_details": {"accepted_prediction_tokens": 6}}  # fmt: skip
    reame.add(json.dumps({"choices": [], "usage": usage}), 0.2)
    t = reame.finish(0.3)
    assert (t.num_cached_tokens, t.num_accepted_drafts, t.num_tokens) == (40, 6, 10)
    peer = ChunkTally(Timeline(0.0))
    timings = {"cache_n": 37, "prompt_n": 1, "draft_n": 8, "draft_n_accepted": 5}
    peer.add(json.dumps({"choices": [], "usage": {"prompt_tokens": 38}, "timings": timings}), 0.2)
    t = peer.finish(0.3)
    assert (t.num_cached_tokens, t.num_accepted_drafts) == (37, 5)
    silent = ChunkTally(Timeline(0.0))
    silent.add('{"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}', 0.1)
    assert silent.finish(0.2).num_accepted_drafts is None


def record(index: int, total: float, server: str = "reame", mode: str = "one-client",
           turn: int = 1, overlap: float | None = None, error: str = "",
           ttft: float | None = None, drafts: int | None = None) -> Record:  # fmt: skip
    return Record("chat", server, mode, index, index % 4, turn, 0, float(index),
                  total / 2 if ttft is None else ttft, total, 50.0, 100, 60, 10, drafts, overlap,
                  False, error)  # fmt: skip


def test_windows_and_the_hundredth_request_figure() -> None:
    assert window_size(100) == 10 and window_size(8) == 2 and window_size(3) == 1
    spans = windows(100, 50)
    assert [(w.first, w.last) for w in spans.values()] == [(1, 10), (91, 100), (41, 50), (51, 60)]
    run = [record(i, 2.0 if i <= 10 else 1.0 if i <= 90 else 0.5) for i in range(1, 101)]
    run[3] = record(4, 99.0)  # one slow request does not move a median
    run[95] = record(96, 0.0, error="HTTP 500")  # a failed one is left out
    figs = run_figures(run, 100, None)
    assert figs["first"] == 2.0 and figs["last"] == 0.5
    assert figs["last_over_first"] == pytest.approx(0.25)
    assert figs["errors"] == 1 and figs["cached_share"] == pytest.approx(0.6)
    assert figs["drafted_share"] is None and "after" not in figs
    restarted = [record(i, 1.0 if i <= 50 else 4.0 if i <= 60 else 1.0) for i in range(1, 101)]
    figs = run_figures(restarted, 100, 50)
    assert figs["before"] == 1.0 and figs["after"] == 4.0
    assert figs["after_over_before"] == pytest.approx(4.0) and figs["last_over_first"] == 1.0


def test_later_turns_and_drafts() -> None:
    run = [record(1, 2.0, turn=1, ttft=1.5), record(2, 1.0, turn=2, ttft=0.1, drafts=5),
           record(3, 1.0, turn=3, ttft=0.3, drafts=None)]  # fmt: skip
    figs = run_figures(run, 3, None)
    assert figs["ttft_first_turns"] == 1.5 and figs["ttft_later_turns"] == pytest.approx(0.2)
    assert figs["drafted_share"] == pytest.approx(5 / 10)  # only the answers that said


def test_the_report_says_which_server_called_tools_and_how_long_its_answers_were() -> None:
    run_modes = modes(4, 1)[:1]
    calls = [replace(record(i, 1.0), tool_calls=1 if i <= 3 else 0) for i in range(1, 5)]
    text = [replace(record(i, 1.0, "llama-server"), completion_tokens=32) for i in range(1, 5)]
    figs = figures(calls + text, 4, run_modes)
    assert figs["chat"]["reame"]["one-client"]["tool_call_share"] == pytest.approx(0.75)
    table = trace_table(figs["chat"], ["reame", "llama-server"], run_modes, 4, True)
    assert "| answers that called a tool | 75% | 0% |  |" in table
    assert "| completion tokens (median) | 10 | 32 |  |" in table
    alone = figures(text, 4, run_modes)["chat"]
    no_tools = trace_table(alone, ["llama-server"], run_modes, 4, True)
    assert "called a tool" not in no_tools  # a trace without tools has no such row


def test_the_speedup_against_overlap() -> None:
    run = [record(i, 1.0, overlap=level, ttft=ttft)
           for i, (level, ttft) in enumerate([(0.0, 4.0), (0.0, 6.0), (1.0, 0.5), (0.5, 2.5),
                                              (0.75, 2.0), (0.25, 4.0)], start=1)]  # fmt: skip
    levels = overlap_figures(run)
    assert levels[0.0]["ttft"] == 5.0 and levels[0.0]["speedup"] == 1.0
    assert levels[1.0]["speedup"] == 10.0 and levels[0.5]["speedup"] == 2.0
    assert levels[0.25]["requests"] == 1


def test_the_report_puts_reame_and_the_peer_side_by_side(tmp_path: Path) -> None:
    run_modes = modes(20, 3)
    assert [m.key for m in run_modes] == ["one-client", "one-client-restart", "3-users",
                                          "3-users-restart"]  # fmt: skip
    records = []
    for mode in run_modes:
        for server, late in (("reame", 0.2), ("llama-server", 0.8)):
            records += [record(i, 1.0 if i <= 5 else late, server, mode.key, turn=1 + i // 8)
                        for i in range(1, 21)]  # fmt: skip
    rag = [Record("rag", s, "one-client", i, i, 1, 0, 0.0, t, 1.0, None, 10, 0, 5, None, level,
                  False) for s, t in (("reame", 0.5), ("llama-server", 1.0))
           for i, level in enumerate(OVERLAPS, start=1)]  # fmt: skip
    figs = figures(records + rag, 20, run_modes)
    assert figs["chat"]["reame"]["one-client"]["last_over_first"] == pytest.approx(0.2)
    assert figs["chat"]["llama-server"]["3-users-restart"]["after"] == pytest.approx(0.8)
    plots = {"chat cost": "chat_cost.png", "rag overlap": "rag_overlap.png"}
    summaries = {"chat": "a chat", "rag": "a rag"}
    servers = ["reame", "llama-server"]
    md = markdown({"model": "m"}, summaries, figs, servers, run_modes, 20, plots, ["a note"])
    assert "|  | reame | llama-server | reame over llama-server |" in md
    assert "| requests 16-20 over requests 1-5 | 0.20x | 0.80x |  |" in md
    assert "| median time a request, requests 16-20 | 0.200 s | 0.800 s | 0.25x |" in md
    assert "requests 11-15 (after it)" in md and "**3 users at once, restarted after" in md
    assert "time to first token, later turns" in md and "![chat cost](chat_cost.png)" in md
    assert "| 100% | 1 | 0.500 s | 1.000 s | 1.00x | 1.00x | 0.50x |" in md
    assert "- note: a note" in md
    # a running peer has no restart runs: its cells say so
    unrestarted = [r for r in records if r.server == "reame" or "restart" not in r.mode]
    md = markdown({}, summaries, figures(unrestarted, 20, run_modes), servers, run_modes, 20, {})
    assert "| failed requests, one client, restarted after request 10 | 0 | - |" in md
    cost_png("chat", records, servers, run_modes, tmp_path / "chat.png")
    overlap_png(figs["rag_overlap"], servers, tmp_path / "rag.png")
    for name in ("chat.png", "rag.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC


def test_llama_server_gets_the_same_threads_and_slots() -> None:
    command = llama_server_command(Path("/x/llama-server"), Path("/m.gguf"), 2, 4, 4096)
    assert command == ["/x/llama-server", "-m", "/m.gguf", "-t", "2", "-c", "16384", "-np", "4"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--traces", "chat,poem"], "--traces takes"),
        (["--requests", "1"], "--requests takes 2"),
        (["--users", "0"], "--users"),
        (["--load"], "bench of its own"),
        (["--url", "http://127.0.0.1:1", "--llama-server", "/bin/true"], "not both"),
        (["--llama-server", "/no/such/llama-server"], "no such file"),
    ],
)
def test_bad_flags_give_one_line_and_fail(flags: list[str], message: str) -> None:
    out = reame_command("bench", "--replay", *flags)
    assert out.returncode != 0
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.model
def test_the_replay_end_to_end_on_small_sizes(tmp_path: Path) -> None:
    """Against llama-server where it is built; else a second Reame, running, as the peer."""
    peer = None if LLAMA_SERVER.is_file() else small_server(parallel=2, context_length=2048)
    try:
        flags = (["--llama-server", str(LLAMA_SERVER)] if peer is None
                 else ["--url", peer.url, "--name", "peer"])  # fmt: skip
        out = subprocess.run(
            [sys.executable, "-m", "reame.cli.main", "bench", "--replay", "--traces",
             "chat", "--requests", "6", "--users", "2", "--max-tokens", "8",
             "--system-words", "120", "--parallel", "2", "--context-length", "2048",
             "--threads", "2", "--out", str(tmp_path), "--json", *flags],
            capture_output=True, text=True, timeout=400, check=False, env=CLEAN_ENV,
        )  # fmt: skip
    finally:
        if peer is not None:
            peer.stop()
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout)
    peer_name = "llama-server" if peer is None else "peer"
    records = data["records"]
    keys = {(r["trace"], r["server"], r["mode"]) for r in records}
    run_modes = ["one-client", "one-client-restart", "2-users", "2-users-restart"]
    assert {("chat", "reame", m) for m in run_modes} <= keys
    peer_modes = run_modes if peer is None else ["one-client", "2-users"]
    assert {("chat", peer_name, m) for m in peer_modes} <= keys
    assert all(not r["error"] for r in records)
    assert all(r["ttft"] > 0 and r["total"] >= r["ttft"] for r in records)
    chat = [r for r in records if r["trace"] == "chat" and r["server"] == "reame"]
    assert len(chat) == 6 * 4
    # the chat's second turns come after its first: the system prompt is cached by then
    later = [r for r in chat if r["turn"] > 1]
    assert later and all(r["cached_tokens"] > 0 for r in later)
    restarted = [r for r in chat if r["mode"] == "one-client-restart" and r["after_restart"]]
    assert [r["index"] for r in restarted] == [4, 5, 6]
    assert restarted[0]["cached_tokens"] > 0  # Reame kept its cache across the restart
    assert any(r["accepted_drafts"] is not None for r in chat)
    figs = data["figures"]
    assert figs["chat"]["reame"]["one-client"]["last_over_first"] > 0
    assert figs["chat"][peer_name]["one-client"]["first"] > 0
    report = (tmp_path / "report.md").read_text()
    assert "## chat" in report and "| median time a request, request 6 | " in report
    assert (tmp_path / "chat_cost.png").read_bytes()[:8] == PNG_MAGIC
    assert json.loads((tmp_path / "per_request.json").read_text())["records"] == records
