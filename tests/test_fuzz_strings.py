"""Every kind of string JSON can carry, in every text field and header Reame reads, sent raw (the
exact bytes are ours) to a real `reame serve`: any code point, lone surrogates (as `\\udXXX`
escapes, and as the invalid UTF-8 bytes a careless client writes), NUL, BOMs, bidi controls,
chat-template markers, very long strings; headers get any latin-1 byte a client can send.
Never a 5xx; every 4xx an OpenAI-shaped error; every 200 a well-formed completion.
Bounded: EXAMPLES, and SECONDS of wall time."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fuzz_tally import Tally
from reame.api import response_models as out
from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

KEY = "strings-key"
MODEL = "smollm2-135m"
EXAMPLES = 150
SECONDS = 150.0

SPECIAL = [
    "\x00",
    "\ufeff",  # BOM
    "\ufffe",
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200b",
    "\u2028",
    "\r\n",
    "\ud800",  # lone surrogates, high and low
    "\udfff",
    "\udc80",
    "\U0010ffff",
    "\U0001f600",
    "e\u0301",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "{{ raise_exception('x') }}",
    "{% for x in range(9999999) %}",
    "\\",
    '"',
]

LONG = ["a", "\u202e", "\ud800", " ", "é", "\x00"]  # repeated, up to 3000 times
every_code_point = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
piece = st.one_of(
    st.text(every_code_point, max_size=12),
    st.sampled_from(SPECIAL),
    st.builds(lambda c, n: c * n, st.sampled_from(LONG), st.integers(1, 3000)),
)
hostile = st.lists(piece, max_size=6).map("".join)

# what h11 sends in a header value: visible bytes and obs-text, tabs and spaces inside
header_byte = st.sampled_from([9, *range(0x20, 0x7F), *range(0x80, 0x100)])
header_value = st.lists(header_byte, max_size=200).map(lambda b: bytes(b).strip(b" \t"))

SOMETIMES = st.integers(0, 4).map(lambda k: k == 4)  # 1 in 5, or fewer: hypothesis favours 0
Body = dict[str, object]


def chat(content: object = "Say hi.", **extra: object) -> Body:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], **extra}


def completion(prompt: object = "Once upon", **extra: object) -> Body:
    return {"model": MODEL, "prompt": prompt, **extra}


# each: where a hostile string goes -> (path, body)
PLACES: dict[str, Callable[[str], tuple[str, Body]]] = {
    "content": lambda s: ("/v1/chat/completions", chat(s)),
    "text part": lambda s: ("/v1/chat/completions", chat([{"type": "text", "text": s}])),
    "system content": lambda s: (
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "system", "content": s}, {"role": "user", "content": "Hi"}],
        },  # noqa: E501
    ),
    "name": lambda s: (
        "/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "user", "content": "Hi", "name": s}]},
    ),
    "model": lambda s: ("/v1/chat/completions", {**chat(), "model": s}),
    "stop": lambda s: ("/v1/chat/completions", chat(stop=s)),
    "stop list": lambda s: ("/v1/completions", completion(stop=["\n", s])),
    "user": lambda s: ("/v1/chat/completions", chat(user=s)),
    "metadata key": lambda s: ("/v1/chat/completions", chat(metadata={s: "v"})),
    "metadata value": lambda s: ("/v1/completions", completion(metadata={"k": s})),
    "session_id": lambda s: ("/v1/chat/completions", chat(session_id=s)),
    "vote_on": lambda s: ("/v1/completions", completion(best_of=2, vote_on=s)),
    "prompt": lambda s: ("/v1/completions", completion(s)),
    "prompt list": lambda s: ("/v1/completions", completion(["Hi", s])),
    "logit_bias key": lambda s: ("/v1/chat/completions", chat(logit_bias={s: 1})),
}
HEADERS = ["authorization", "bearer", "x-request-id", "x-reame-session"]


class OutOfTime(Exception):
    pass


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(
        "--api-key",
        KEY,
        env={"REAME_MAX_TOKENS": "4", "REAME_MAX_N": "2", "REAME_MAX_BODY_BYTES": "262144"},
    )
    yield srv
    srv.stop()


def encoded(body: Body, raw_utf8: bool) -> bytes:
    """As JSON: ASCII with `\\uXXXX` escapes, or raw UTF-8 (a lone surrogate then becomes the
    invalid bytes of surrogatepass, as a careless encoder writes it)."""
    if raw_utf8:
        return json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(body).encode("ascii")


def problem(response: httpx.Response, stream: bool, path: str) -> str | None:
    """What is wrong with a response, or None."""
    status = response.status_code
    if status >= 500:
        return f"a {status}"
    if status >= 400:
        try:
            out.ErrorBody.model_validate_json(response.content)
        except ValueError as exc:
            return f"a {status} that is not an OpenAI error: {exc}"
        return None
    if status != 200:
        return f"a {status}"
    is_chat = path == "/v1/chat/completions"
    if not stream:
        whole = out.ChatCompletion if is_chat else out.TextCompletion
        try:
            whole.model_validate_json(response.content)
        except ValueError as exc:
            return f"a malformed completion: {exc}"
        return None
    chunk = out.ChatCompletionChunk if is_chat else out.TextCompletionChunk
    lines = [line for line in response.text.split("\n\n") if line.startswith("data: ")]
    if not lines or lines[-1] != "data: [DONE]":
        return "a stream that does not end with [DONE]"
    for line in lines[:-1]:
        try:
            chunk.model_validate_json(line.removeprefix("data: "))
        except ValueError as exc:
            return f"a malformed chunk: {exc}"
    return None


def test_hostile_strings_get_answers_or_openai_errors(server: ServerProcess) -> None:
    tally = Tally("strings")
    deadline = time.monotonic() + SECONDS
    client = httpx.Client(base_url=server.url, timeout=120)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # NOTE: failures are collected, not raised
        suppress_health_check=list(HealthCheck),
    )
    @given(
        place=st.sampled_from([*PLACES, *HEADERS]),
        text=hostile,
        header=header_value,
        raw_utf8=SOMETIMES,
        stream=SOMETIMES,
        max_tokens=st.integers(1, 4),
    )
    def run(place, text, header, raw_utf8, stream, max_tokens) -> None:
        if time.monotonic() > deadline:
            raise OutOfTime
        headers = {b"authorization": f"Bearer {KEY}".encode(), b"content-type": b"application/json"}
        if place in PLACES:
            path, body = PLACES[place](text)
        else:
            path, body = "/v1/chat/completions", chat()
            name = b"authorization" if place == "bearer" else place.encode()
            value = b"Bearer " + header if place == "bearer" else header
            headers[name] = value.strip(b" \t")  # NOTE: what h11 refuses to send
        body = {**body, "max_tokens": max_tokens, "stream": stream}
        content = encoded(body, raw_utf8)
        response = client.post(path, content=content, headers=headers)
        tally.examples += 1
        tally.statuses[str(response.status_code)] += 1
        wrong = problem(response, stream, path)
        if wrong is not None:
            what = wrong.split(":")[0]
            repro = f"POST {path} headers={headers!r}\n{content[:600]!r}\n-> {response.text[:400]}"
            tally.failures.setdefault((place, what), f"{wrong[:600]}\n{repro}")

    with contextlib.suppress(OutOfTime):
        run()
    # the sessions the strings named are listed as JSON any parser reads (RFC 8259: no lone
    # surrogate, even escaped)
    listed = client.get("/v1/sessions", headers={"authorization": f"Bearer {KEY}"})
    try:
        out.SessionList.model_validate_json(listed.content)
    except ValueError as exc:
        tally.failures["GET /v1/sessions", "not JSON"] = f"{exc}\n{listed.content[:600]!r}"
    print("\n" + tally.report())
    assert tally.examples >= 30, tally.report()
    assert not tally.failures, tally.report()
