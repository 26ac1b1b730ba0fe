"""Schemathesis over every operation of the OpenAPI document a real `reame serve` publishes at
/openapi.json, with data that fits the document and data that does not: no 5xx, every 4xx an
OpenAI-shaped error, every response as documented (status, content type, headers, body), and
no /v1 route answering without the key. Bounded: EXAMPLES and SECONDS a mode and operation
(about 150 s in all, plus the server's start)."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from fuzz_tally import Tally
from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

KEY = "fuzz-key"
MODEL = "smollm2-135m"
AUTH = {"Authorization": f"Bearer {KEY}"}
EXAMPLES = 30  # a generation mode and operation, at most
# NOTE: seconds a mode and operation, so a slow machine cuts every operation short, not the last
NEGATIVE_ACCEPTED = "Schema-violating request accepted"  # schemathesis's title for it
SECONDS = {("POST", "positive"): 30.0, ("POST", "negative"): 15.0}
OTHER_SECONDS = 4.0
MOSTLY = st.integers(0, 3).map(lambda k: k != 3)  # 3 in 4, or more: hypothesis favours 0
MAX_TOKENS = 4  # NOTE: what the fuzzer asks for is cut to this: the answer is not under test


def error_shape(ctx, response, case) -> None:
    """Every 4xx says what is wrong as the route's API does (Anthropic's on /v1/messages,
    else OpenAI's), and no traceback."""
    if 400 <= response.status_code < 500 and case.path.startswith("/v1/messages"):
        body = response.json()
        assert set(body) == {"type", "error"} and body["type"] == "error", body
        assert set(body["error"]) == {"type", "message"} and body["error"]["message"], body
        assert "Traceback" not in response.text
    elif 400 <= response.status_code < 500:
        body = response.json()
        assert isinstance(body, dict) and set(body) == {"error"}, body
        error = body["error"]
        assert set(error) == {"message", "type", "param", "code"}, error
        assert isinstance(error["message"], str) and error["message"], error
        assert isinstance(error["type"], str), error
        assert error["param"] is None or isinstance(error["param"], str), error
        assert error["code"] is None or isinstance(error["code"], str), error
        assert "Traceback" not in response.text


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    ignored_auth,
    error_shape,
]


class OutOfTime(Exception):
    pass


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(
        "--api-key",
        KEY,
        env={"REAME_MAX_TOKENS": "8", "REAME_MAX_N": "2", "REAME_MAX_BODY_BYTES": "65536"},
    )
    yield srv
    srv.stop()


GENERATING = ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses")


def bounded(case: Case, real_model: bool) -> None:
    """Short answers; and, for most cases that fit the document, the model served (a random
    name is a 404 that never reaches the engine)."""
    body = case.body
    is_positive = case.meta is not None and case.meta.generation.mode.is_positive
    if not isinstance(body, dict) or case.path not in GENERATING:
        if isinstance(body, dict) and is_positive and real_model and "model" in body:
            body["model"] = MODEL
        return
    for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_TOKENS:
            body[name] = MAX_TOKENS
    if case.meta is not None and case.meta.generation.mode.is_positive:
        limit = "max_output_tokens" if case.path == "/v1/responses" else "max_tokens"
        body.setdefault(limit, MAX_TOKENS)
        if real_model:
            body["model"] = MODEL
            for name in ("previous_response_id", "conversation", "prompt"):  # 404s, 400s
                body.pop(name, None)


def fuzz(operation, mode: GenerationMode, base_url: str, tally: Tally) -> None:
    seconds = SECONDS.get((operation.method.upper(), mode.value), OTHER_SECONDS)
    deadline = time.monotonic() + seconds

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # NOTE: failures are collected, not raised
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(mode), real_model=MOSTLY)
    def run(case: Case, real_model: bool) -> None:
        if time.monotonic() > deadline:
            raise OutOfTime  # NOTE: ends the generating too, which costs seconds a chat body
        bounded(case, real_model)
        response = case.call(base_url=base_url, headers=AUTH, timeout=120)
        tally.examples += 1
        tally.statuses[str(response.status_code)] += 1
        try:
            case.validate_response(
                response,
                checks=CHECKS,
                headers=AUTH,
                transport_kwargs={"base_url": base_url, "headers": AUTH, "timeout": 120},
            )
        except FailureGroup as group:
            for failure in group.exceptions:
                # NOTE: a schema-violating body over max_body_bytes gets a 413 before it is
                # read: refused, though schemathesis counts only 4xx codes of its list
                if response.status_code == 413 and failure.title == NEGATIVE_ACCEPTED:
                    continue
                key = (operation.label, failure.title)
                tally.failures.setdefault(key, f"{failure.message}\n{case.as_curl_command()}")

    started, before = time.monotonic(), Counter(tally.statuses)
    # NOTE: Unsatisfiable: nothing the document forbids can be sent here (a route with no input)
    with contextlib.suppress(Unsatisfiable, OutOfTime):
        run()
    took = time.monotonic() - started
    statuses = ", ".join(f"{k} x{v}" for k, v in sorted((tally.statuses - before).items()))
    print(f"{operation.label} {mode}: {took:.1f} s, {statuses or 'no examples'}")


def test_every_operation_keeps_to_the_document(server: ServerProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", headers=AUTH)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 17, [op.label for op in operations]
    tally = Tally("schemathesis")
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        for operation in operations:
            fuzz(operation, mode, server.url, tally)
    print("\n" + tally.report())
    assert tally.examples >= 100, tally.report()
    assert not tally.failures, tally.report()
