"""`reame bench --structured`: the seeded workloads and their grading, the stream folding and
the report's arithmetic without a server; then one short real run of the command."""

from __future__ import annotations

import argparse
import json
from collections import Counter

import pytest

from reame.errors import ConfigError
from reame_bench.cli.structured import bench as structured_bench
from reame_bench.structured_grade import Answer, ToolCall, grade, schema_problem
from reame_bench.structured_report import (
    DECODE,
    FORCED,
    GRAMMAR,
    INVALID,
    LENGTH,
    MASK,
    PER_STEP,
    REQUESTS,
    SAME,
    TOKENS,
    TOOL_OK,
    VALID,
    WALL,
    Result,
    as_dict,
    as_table,
    metric_figures,
    metrics_delta,
    summarize,
)
from reame_bench.structured_runner import FORCED_OFF, FORCED_ON, StreamFold
from reame_bench.structured_workload import (
    EXTRACTION,
    MAX_TOKENS,
    ORDER_SCHEMA,
    TOOL_SCHEMAS,
    TOOLS,
    extraction_items,
    tool_items,
)
from reame_bench.targets import Timeline
from reame_command import reame_command


def test_the_same_seed_gives_the_same_items_and_another_seed_others() -> None:
    assert extraction_items(3, 20) == extraction_items(3, 20)
    assert tool_items(3, 20) == tool_items(3, 20)
    assert extraction_items(3, 20) != extraction_items(4, 20)
    assert tool_items(3, 20) != tool_items(4, 20)
    assert extraction_items(3, 5) == extraction_items(3, 20)[:5]  # N only cuts the list


def test_items_vary_across_the_workload() -> None:
    notes = extraction_items(1, 40)
    assert len({n.messages[-1]["content"] for n in notes}) == 40
    for key in ("name", "city", "date", "amount", "status"):
        assert len({json.dumps(n.expected[key]) for n in notes}) > 2, key
    assert {len(n.expected["items"]) for n in notes} == {1, 2, 3, 4}
    calls = tool_items(1, 40)
    assert len({c.messages[-1]["content"] for c in calls}) == 40
    assert set(Counter(c.expected_tool for c in calls)) == set(TOOL_SCHEMAS)
    body = calls[0].body("m")
    assert body["tool_choice"] == "required" and len(body["tools"]) == 3
    assert body["temperature"] == 0 and body["stream"]
    rf = notes[0].body("m")["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == ORDER_SCHEMA


def test_every_expected_answer_matches_its_schema_and_a_wrong_one_does_not() -> None:
    for item in extraction_items(2, 60):
        assert schema_problem(ORDER_SCHEMA, item.expected) == "", item.expected
    for item in tool_items(2, 60):
        assert schema_problem(TOOL_SCHEMAS[item.expected_tool], item.expected) == ""
    good = extraction_items(2, 1)[0].expected
    assert schema_problem(ORDER_SCHEMA, {**good, "extra": 1})
    assert schema_problem(ORDER_SCHEMA, {**good, "items": ["a"] * 5})
    assert schema_problem(ORDER_SCHEMA, {**good, "status": "lost"})
    assert schema_problem(ORDER_SCHEMA, {**good, "name": "x" * 41})


def answer(
    text: str = "",
    reason: str | None = "stop",
    calls: list[ToolCall] | None = None,
    wall: float = 1.0,
    tokens: int = 11,
) -> Answer:
    # the first chunk at 0.5 s, the last at `wall`: decode (tokens - 1) / (wall - 0.5)
    t = Timeline(0.0, first=0.5, finished=wall, num_tokens=tokens, text=text)
    t.token_times = [0.5, (0.5 + wall) / 2, wall]
    return Answer(t, reason, calls or [])


def test_extraction_answers_are_graded_by_the_schema_and_the_expected_fields() -> None:
    item = extraction_items(5, 1)[0]
    right = grade(item, answer(json.dumps(item.expected)))
    assert right.is_valid and right.accuracy == 1.0
    half = {**item.expected, "name": "Nobody", "city": "Nowhere", "amount": 0}
    assert grade(item, answer(json.dumps(half))).accuracy == pytest.approx(0.5)
    assert grade(item, answer('{"name": "A"')).is_valid is False
    assert grade(item, answer(json.dumps({**item.expected, "x": 1}))).is_valid is False
    cut = grade(item, answer('{"name": "A', reason="length"))
    assert cut.is_valid is None and cut.is_length


def test_tool_answers_need_a_known_tool_with_valid_arguments() -> None:
    item = tool_items(5, 1)[0]
    args = json.dumps(item.expected)
    right = grade(item, answer(reason="tool_calls", calls=[ToolCall(item.expected_tool, args)]))
    assert right.is_valid and right.is_tool_call_valid and right.accuracy == 1.0
    other = next(n for n in TOOL_SCHEMAS if n != item.expected_tool)
    wrong_args = grade(item, answer(reason="tool_calls", calls=[ToolCall(other, args)]))
    assert wrong_args.is_valid is False and not wrong_args.is_tool_call_valid
    unknown = grade(item, answer(reason="tool_calls", calls=[ToolCall("rm_rf", "{}")]))
    assert unknown.is_valid is False and "unknown tool" in unknown.problem
    broken = grade(item, answer(reason="tool_calls", calls=[ToolCall(item.expected_tool, "{")]))
    assert broken.is_valid is False
    assert grade(item, answer("I would call a tool")).problem == "no tool call"
    assert grade(item, answer(reason="length")).is_length
    cut = [ToolCall(item.expected_tool, args), ToolCall(item.expected_tool, args[:9])]
    capped = grade(item, answer(reason="tool_calls", calls=cut, tokens=MAX_TOKENS[TOOLS]))
    assert (
        capped.is_valid is False and "at max_tokens, yet finish_reason tool_calls" in capped.problem
    )


def sse_chunk(delta: dict, finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def call_chunk(delta: dict) -> str:
    return sse_chunk({"tool_calls": [delta]})


def test_a_streamed_tool_call_is_put_together_and_timed() -> None:
    fold = StreamFold(Timeline(0.0))
    first = {"index": 0, "id": "c1", "type": "function"}
    payloads = [
        sse_chunk({"role": "assistant", "content": None}),
        call_chunk({**first, "function": {"name": "get_weather", "arguments": ""}}),
        call_chunk({"index": 0, "function": {"arguments": '{"city": "Oslo", '}}),
        call_chunk({"index": 0, "function": {"arguments": '"unit": "celsius"}'}}),
        sse_chunk({}, finish="tool_calls"),
        json.dumps({"choices": [], "usage": {"prompt_tokens": 90, "completion_tokens": 14}}),
        "[DONE]",
        sse_chunk({"content": "after the end"}),
    ]
    for i, payload in enumerate(payloads):
        fold.add(payload, float(i))
    got = fold.finish(9.0)
    assert got.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in got.tool_calls] == [
        ("get_weather", {"city": "Oslo", "unit": "celsius"})
    ]
    t = got.timeline
    assert (t.first, t.token_times, t.num_tokens, t.num_prompt_tokens) == (1.0, [1, 2, 3], 14, 90)
    assert t.text == ""


def test_metrics_deltas_start_a_new_series_from_zero() -> None:
    before = {"a": 5.0}
    after = {"a": 7.0, 'reame_grammar_requests_total{kind="json_schema"}': 3.0}
    assert metrics_delta(before, after) == {
        "a": 2.0,
        'reame_grammar_requests_total{kind="json_schema"}': 3.0,
    }
    assert metrics_delta(None, after) is None and metrics_delta(before, None) is None


REAME_DELTA = {
    "reame_generated_tokens_total": 200.0,
    "reame_engine_step_seconds_count": 80.0,
    "reame_engine_step_seconds_sum": 1.6,  # 20 ms a step
    "reame_grammar_forced_tokens_total": 50.0,
    "reame_grammar_mask_seconds_count": 120.0,
    "reame_grammar_mask_seconds_sum": 0.24,  # 2 ms a mask
    'reame_grammar_requests_total{kind="json_schema"}': 3.0,
    'reame_grammar_requests_total{kind="tools"}': 0.0,
}


def test_the_reame_figures_come_from_the_metrics_and_are_none_without_them() -> None:
    figures = metric_figures(REAME_DELTA)
    assert figures[PER_STEP] == pytest.approx(2.5)
    assert figures[FORCED] == pytest.approx(0.25)
    assert figures[MASK] == pytest.approx(0.1)
    assert figures[GRAMMAR] == 3
    assert set(metric_figures(None).values()) == {None}
    # a Reame from before grammars: tokens a step, but no forced share or mask cost
    old = metric_figures({k: v for k, v in REAME_DELTA.items() if "grammar" not in k})
    assert old[PER_STEP] == pytest.approx(2.5) and old[FORCED] is None and old[GRAMMAR] is None


def graded(items: list, answers: list[Answer]) -> list:
    return [grade(i, a) for i, a in zip(items, answers, strict=True)]


def test_the_report_counts_validity_and_pairs_ratios_per_request() -> None:
    items = extraction_items(9, 3)
    ok = [json.dumps(i.expected) for i in items]
    off_answers = [answer(ok[0], wall=2.0), answer(ok[1], wall=4.0), answer('{"x', "length")]
    on_answers = [answer(ok[0], wall=1.0), answer("{}", wall=1.0), answer(ok[2], wall=3.0)]
    off_delta = {**REAME_DELTA, "reame_engine_step_seconds_count": 200.0}
    llama = [answer(ok[0], wall=4.0), answer(), answer(ok[2], wall=6.0)]
    results = {
        EXTRACTION: {
            FORCED_OFF: Result(off_answers, graded(items, off_answers), off_delta),
            FORCED_ON: Result(on_answers, graded(items, on_answers), REAME_DELTA),
            "llama": Result(llama, graded(items, llama), None, ["", "HTTP 500: no", ""]),
        }
    }
    figures = summarize(results, [FORCED_OFF, FORCED_ON, "llama"])
    rows, ratios = figures.rows[EXTRACTION], figures.ratios[EXTRACTION]
    assert rows[REQUESTS] == {FORCED_OFF: 3, FORCED_ON: 3, "llama": 3}
    assert rows[VALID] == {FORCED_OFF: 2, FORCED_ON: 2, "llama": 2}
    assert rows[INVALID] == {FORCED_OFF: 0, FORCED_ON: 1, "llama": 0}
    assert rows[LENGTH] == {FORCED_OFF: 1, FORCED_ON: 0, "llama": 0}
    assert rows[TOOL_OK] == {FORCED_OFF: None, FORCED_ON: None, "llama": None}
    assert rows[SAME] == {FORCED_OFF: 3, FORCED_ON: 1, "llama": 1}
    assert rows[WALL][FORCED_OFF] == 2.0 and rows[WALL]["llama"] == 5.0  # the failed one is out
    # per request pairs: 1/2, 1/4, 3/1 -> median 0.5; llama: 4/2, 6/1 -> median 4
    assert ratios[WALL] == {FORCED_ON: 0.5, "llama": 4.0}
    assert rows[DECODE][FORCED_OFF] == pytest.approx(10 / 1.5)  # (11 - 1) / (2.0 - 0.5)
    assert ratios[TOKENS] == {FORCED_ON: 1.0, "llama": 1.0}
    assert rows[PER_STEP] == {FORCED_OFF: 1.0, FORCED_ON: 2.5, "llama": None}
    assert ratios[PER_STEP] == {FORCED_ON: 2.5, "llama": None}
    assert rows[FORCED]["llama"] is None and rows[MASK][FORCED_ON] == pytest.approx(0.1)
    table = as_table({"seed": 9}, figures)
    per_step = next(line for line in table.splitlines() if line.startswith(PER_STEP))
    assert per_step.split()[-4:] == ["2.500", "-", "2.50x", "-"]
    assert "llama: request 1: HTTP 500: no" in table
    assert "valid tool calls" not in table  # not a tools workload
    data = json.loads(json.dumps(as_dict({"seed": 9}, figures)))
    assert data["workloads"][EXTRACTION]["figures"][f"same answer as {FORCED_OFF}"][FORCED_ON] == 1


def test_the_tools_workload_counts_valid_tool_calls() -> None:
    items = tool_items(4, 2)
    calls = [
        answer(reason="tool_calls", calls=[ToolCall(i.expected_tool, json.dumps(i.expected))])
        for i in items
    ]
    plain = [answer("no"), answer(reason="tool_calls", calls=[ToolCall("nope", "{}")])]
    figures = summarize(
        {
            TOOLS: {
                "a": Result(calls, graded(items, calls)),
                "b": Result(plain, graded(items, plain)),
            }
        },
        ["a", "b"],
    )
    assert figures.rows[TOOLS][TOOL_OK] == {"a": 2, "b": 0}
    assert figures.rows[TOOLS][INVALID] == {"a": 0, "b": 2}
    assert "valid tool calls" in as_table({}, figures)


def test_structured_is_a_bench_of_its_own() -> None:
    args = argparse.Namespace(
        load=True, soak=False, prefix=False, spec=False, structure=False, conclave=False,
        in_process=False, items=2, url=[], name=[], model=None,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="--load"):
        structured_bench(args, print)
    args.load, args.items = False, 0
    with pytest.raises(ConfigError, match="--items"):
        structured_bench(args, print)


@pytest.mark.model
def test_a_short_structured_bench_of_reame_with_forced_runs_off_and_on() -> None:
    result = reame_command("bench", "--structured", "--items", "2", "--seed", "1", "--json",
                           timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert data["targets"] == [FORCED_OFF, FORCED_ON]
    for workload in (EXTRACTION, TOOLS):
        rows = data["workloads"][workload]["figures"]
        for name in (FORCED_OFF, FORCED_ON):
            assert rows[REQUESTS][name] == 2
            assert rows[INVALID][name] == 0, data["workloads"][workload]["problems"]
            assert rows[VALID][name] + rows[LENGTH][name] == 2
            assert rows[GRAMMAR][name] == 2
            assert rows[PER_STEP][name] is not None and rows[MASK][name] is not None
        assert rows[FORCED][FORCED_ON] > 0
        assert rows[PER_STEP][FORCED_ON] > rows[PER_STEP][FORCED_OFF]
        assert rows[PER_STEP][FORCED_OFF] == pytest.approx(1.0, abs=0.05)
    tools = data["workloads"][TOOLS]["figures"]
    assert tools[TOOL_OK][FORCED_ON] + tools[LENGTH][FORCED_ON] == 2
