"""The answer memory's key (api/answer_key.py): every field of the request models is listed as
shaping the answer or not (a field added later fails here until it is placed), and a hypothesis
property over every field: changing one that shapes the answer changes the key, changing one that
does not leaves it. Model-free."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reame.api.answer_key import OTHER_FIELDS, OUTPUT_FIELDS, ServerSide, answer_key
from reame.api.schemas import ChatRequest, CompletionRequest
from reame.engine.request import ThoughtSpec
from reame.sampling import SamplingParams
from reame.service import Job

SERVER = ServerSide("fingerprint", "{{ messages }}", "")
USER = [{"role": "user", "content": "What is 17+25?"}]
BASES: dict[type, dict[str, Any]] = {
    ChatRequest: {"model": "m", "messages": USER},
    CompletionRequest: {"model": "m", "prompt": "What is 17+25?"},
}
SCHEMA = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
# two values each field may take (the first is not its default)
VALUES: dict[str, tuple[Any, Any]] = {
    "max_tokens": (7, 9),
    "temperature": (0.0, 0.5),
    "top_p": (0.5, 0.9),
    "seed": (1, 2),
    "stop": (["x"], ["y", "z"]),
    "n": (2, 3),
    "presence_penalty": (0.5, 1.0),
    "frequency_penalty": (0.5, 1.0),
    "logit_bias": ({"5": 1.0}, {"5": 2.0}),
    "top_k": (1, 5),
    "min_p": (0.1, 0.2),
    "repetition_penalty": (1.1, 1.2),
    "ignore_eos": (True, False),
    "session_id": ("s1", "s2"),
    "best_of": (2, 3),
    "vote_on": ("number", "line"),
    "vote_early_stop": (False, True),
    "response_format": ({"type": "json_object"}, SCHEMA),
    "grammar": ("start: /a+/", "start: /b+/"),
    "messages": ([{"role": "user", "content": "What is 2+2?"}], USER),
    "max_completion_tokens": (7, 9),
    "logprobs": (True, False),
    "top_logprobs": (2, 3),
    "tools": ([TOOL], None),
    "tool_choice": ("none", "required"),
    "parallel_tool_calls": (False, True),
    "reasoning_effort": ("low", "high"),
    "reasoning_budget": (10, 20),
    "chat_template_kwargs": ({"enable_thinking": False}, {"enable_thinking": True}),
    "continue_final_message": (True, False),
    "prompt": ("What is 2+2?", [[1, 2], [3]]),
    "echo": (False, False),  # NOTE: only false is taken: nothing to tell apart
    "model": ("m", "alias"),
    "stream": (True, False),
    "stream_options": ({"include_usage": True}, None),
    "user": ("u1", "u2"),
    "metadata": ({"a": "b"}, None),
    "speculation": ("off", "on"),
    "answer_memory": (False, True),
}
FIELDS = sorted({(t, f) for t, fields in OUTPUT_FIELDS.items() for f in fields | OTHER_FIELDS[t]},
                key=lambda x: (x[0].__name__, x[1]))  # fmt: skip


def job(params: SamplingParams | None = None, prompt: list[int] | None = None) -> Job:
    return Job(prompt or [1, 2, 3], params or SamplingParams(temperature=0.0))


def body(kind: type, **fields: Any) -> ChatRequest | CompletionRequest:
    values = {**BASES[kind], **fields}
    if kind is ChatRequest and values.get("continue_final_message"):
        values["messages"] = [*USER, {"role": "assistant", "content": "It is"}]
    if kind is CompletionRequest and "logprobs" in values:
        values["logprobs"] = 2 if values["logprobs"] else None  # a count there
    return kind.model_validate(values)


def test_every_field_of_the_request_models_is_placed_once() -> None:
    for kind in (ChatRequest, CompletionRequest):
        output, other = OUTPUT_FIELDS[kind], OTHER_FIELDS[kind]
        assert not output & other
        assert output | other == set(kind.model_fields), kind.__name__
    assert {f for _, f in FIELDS} <= VALUES.keys()  # each has values to tell apart


@given(st.sampled_from(FIELDS), st.sampled_from(sorted(VALUES)))
def test_a_field_that_shapes_the_answer_changes_the_key_one_that_does_not_leaves_it(
    field: tuple[type, str], beside: str
) -> None:
    kind, name = field
    first, second = VALUES[name]
    if first == second:
        return  # NOTE: the field takes one value
    # NOTE: another field set alike on both sides, where the model has it
    common = {beside: VALUES[beside][0]} if beside in kind.model_fields and beside != name else {}
    one, two = body(kind, **{**common, name: first}), body(kind, **{**common, name: second})
    keys = {answer_key(b, [job()], SERVER, None) for b in (one, two)}
    assert len(keys) == (2 if name in OUTPUT_FIELDS[kind] else 1), name


def test_what_the_request_became_and_the_server_side_are_in_the_key() -> None:
    b = body(ChatRequest)
    key = answer_key(b, [job()], SERVER, None)
    thought = ThoughtSpec("<think>", "</think>", (5,), True, budget=10)
    thinks = Job([1, 2, 3], SamplingParams(temperature=0.0), thought=thought)
    for other in (
        answer_key(b, [job(prompt=[1, 2, 4])], SERVER, None),  # another template's tokens
        answer_key(b, [job(SamplingParams(temperature=0.0, max_tokens=9))], SERVER, None),
        answer_key(b, [thinks], SERVER, None),
        answer_key(b, [job()], ServerSide("other model", "{{ messages }}", ""), None),
        answer_key(b, [job()], ServerSide("fingerprint", "another template", ""), None),
        answer_key(b, [job()], ServerSide("fingerprint", "{{ messages }}", "a key"), None),
        answer_key(b, [job()], SERVER, "a session"),
        answer_key(b, [job()], SERVER, None, extra=(3, 0.7, "line")),
    ):
        assert other != key
    # the speculation setting changes only how fast
    fast = answer_key(b, [job(SamplingParams(temperature=0.0, speculation="off"))], SERVER, None)
    assert fast == key
