"""The checks on a parsed body before validation, and the caps of schemas.py: pure, no model."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from reame.api.errors import ApiError, from_validation_error
from reame.api.request_checks import check_text, lone_surrogate_path
from reame.api.schemas import ChatRequest, CompletionRequest

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def parsed(text: str) -> object:
    return json.loads(text)


def test_a_lone_surrogate_is_found_and_named_by_its_path() -> None:
    body = parsed('{"model": "m", "messages": [{"role": "user", "content": "a\\udc80b"}]}')
    assert lone_surrogate_path(body) == "messages.0.content"


def test_a_lone_surrogate_in_a_key_names_the_key_escaped() -> None:
    body = parsed('{"metadata": {"ok": "x", "k\\ud800": "v"}}')
    assert lone_surrogate_path(body) == "metadata.k\\ud800"


def test_the_first_in_document_order_is_named() -> None:
    body = parsed('{"a": ["ok", {"b": "\\udfff"}], "c": "\\ud800"}')
    assert lone_surrogate_path(body) == "a.1.b"


def test_a_valid_pair_is_one_code_point_and_passes() -> None:
    body = parsed('{"content": "\\ud83d\\ude00 \\u0000 \\ufeff \\u202e"}')
    assert body["content"].startswith("\U0001f600")
    assert lone_surrogate_path(body) is None
    check_text(body)


def test_a_deeply_nested_body_does_not_recurse() -> None:
    body: object = "\udc80"
    for _ in range(100_000):
        body = [body]
    assert lone_surrogate_path({"x": body}) == "x" + ".0" * 100_000


def test_check_text_is_an_openai_shaped_400_readable_as_utf8() -> None:
    with pytest.raises(ApiError) as caught:
        check_text(parsed('{"user": "\\udc80"}'))
    error = caught.value
    assert error.status == 400 and error.param == "user" and error.code == "invalid_value"
    json.dumps(error.body(), ensure_ascii=False).encode("utf-8")  # no surrogate in the message


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.text() | st.none() | st.integers(),
        lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids),
        max_leaves=20,
    )
)  # noqa: E501
def test_only_values_that_cannot_be_utf8_are_refused(value: object) -> None:
    encodes = True
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        encodes = False
    assert (lone_surrogate_path(value) is None) == encodes


def error_of(model: type, body: dict) -> ApiError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body)
    return from_validation_error(caught.value, body)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"stop": ["a"] * 5}, "stop"),
        ({"stop": "x" * 257}, "stop"),
        ({"stop": ["ok", "x" * 257]}, "stop"),
        ({"stop": [""]}, "stop"),
        ({"logit_bias": {str(i): 1 for i in range(301)}}, "logit_bias"),
        ({"logit_bias": {"5": 101}}, "logit_bias"),
        ({"logit_bias": {"5": -100.5}}, "logit_bias"),
        ({"logit_bias": {"²": 1}}, "logit_bias"),
        ({"logit_bias": {"-5": 1}}, "logit_bias"),
        ({"logit_bias": {"12345678901": 1}}, "logit_bias"),
        ({"vote_on": "x" * 65}, "vote_on"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"temperature": float("nan")}, "temperature"),
        ({"logit_bias": {"5": float("inf")}}, "logit_bias"),
    ],
)
def test_the_caps_are_400s_naming_the_field(extra: dict, param: str) -> None:
    error = error_of(ChatRequest, {**CHAT, **extra})
    assert error.status == 400 and error.param.split(".")[0] == param


def test_what_is_within_the_caps_is_taken() -> None:
    body = ChatRequest.model_validate(
        {
            **CHAT,
            "stop": ["x" * 256] * 4,
            "logit_bias": {str(i): 100 if i % 2 else -100 for i in range(300)},
            "vote_on": "x" * 64,
            "top_logprobs": 20,
        }
    )
    assert body.stop == ["x" * 256] * 4 and len(body.sampling_options()["logit_bias"]) == 300
    assert ChatRequest.model_validate({**CHAT, "stop": "end"}).stop == ["end"]


@pytest.mark.parametrize(
    ("prompt", "param"), [([], "prompt"), ([[]], "prompt.0"), ([[1], []], "prompt.1")]
)
def test_an_empty_prompt_list_is_a_400(prompt: list, param: str) -> None:
    error = error_of(CompletionRequest, {"model": "m", "prompt": prompt})
    assert error.param == param and "at least 1 item" in error.message


@pytest.mark.parametrize(
    ("messages", "param", "needle"),
    [
        ([{"role": "user", "content": [{"type": "text"}]}], "messages.0.content.0.text", "Missing"),
        (
            [{"role": "user", "content": [{"type": "img", "text": ""}]}],
            "messages.0.content.0.type",
            "'text'",
        ),  # noqa: E501
        ([{"role": "wizard"}], "messages.0.role", "'user'"),
    ],
)
def test_a_union_error_names_the_field_in_the_body(messages, param: str, needle: str) -> None:
    error = error_of(ChatRequest, {**CHAT, "messages": messages})
    assert error.param == param and needle in error.message


def test_prompt_forms_are_still_told_apart() -> None:
    def prompts(prompt: object) -> list:
        return CompletionRequest.model_validate({"model": "m", "prompt": prompt}).prompts()

    assert prompts("a") == ["a"] and prompts(["a", "b"]) == ["a", "b"]
    assert prompts([1, 2]) == [[1, 2]] and prompts([[1], [2, 3]]) == [[1], [2, 3]]
