"""`POST /tokenize` and `POST /detokenize` on a real `reame serve` (the embedded SmolLM2), in
llama-server's shapes: ids as the model's own tokenizer gives them, pieces that join back to
the text, a round trip, and clear 400s and 401s."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from reame.llama.model import Model
from server_process import ServerProcess, small_server

pytestmark = pytest.mark.model

KEY = "tokenize-test-key"
TEXT = "Turin, 34 años: naïve café ☕ <|im_start|>"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    srv = small_server(env={"REAME_API_KEYS": KEY})
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def model(smollm2_path) -> Iterator[Model]:
    with Model(smollm2_path) as m:
        yield m


def post(server: ServerProcess, path: str, body: object, key: str | None = KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(server.url + path, json=body, headers=headers, timeout=30)


def test_ids_are_the_models_own_and_special_tokens_are_parsed(
    server: ServerProcess, model: Model
) -> None:
    got = post(server, "/tokenize", {"content": TEXT}).json()
    assert got == {"tokens": model.tokenize(TEXT, add_special=False, parse_special=True)}
    im_start = model.tokenize("<|im_start|>", add_special=False)
    assert len(im_start) == 1 and got["tokens"][-1] == im_start[0]
    plain = post(server, "/tokenize", {"content": TEXT, "parse_special": False}).json()
    assert len(plain["tokens"]) > len(got["tokens"])  # the marker spelled out as text


def test_pieces_join_back_to_the_text_and_bytes_stand_for_split_characters(
    server: ServerProcess,
) -> None:
    got = post(server, "/tokenize", {"content": TEXT, "with_pieces": True}).json()["tokens"]
    assert all(set(t) == {"id", "piece"} for t in got)
    data = b"".join(
        t["piece"].encode() if isinstance(t["piece"], str) else bytes(t["piece"]) for t in got
    )
    assert data.decode() == TEXT
    # NOTE: "☕" is 3 bytes that SmolLM2 splits: pieces that are no whole character are bytes
    assert any(isinstance(t["piece"], list) for t in got)


def test_a_round_trip_and_mixed_content(server: ServerProcess, model: Model) -> None:
    ids = post(server, "/tokenize", {"content": TEXT}).json()["tokens"]
    assert post(server, "/detokenize", {"tokens": ids}).json() == {"content": TEXT}
    mixed = post(server, "/tokenize", {"content": ["Hello", 42, " world"]}).json()["tokens"]
    hello, world = (model.tokenize(t, add_special=False) for t in ("Hello", " world"))
    assert mixed == [*hello, 42, *world]
    assert post(server, "/detokenize", {"tokens": []}).json() == {"content": ""}


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/detokenize", {"tokens": [1, 10**9]}, "tokens.1"),
        ("/tokenize", {"content": ["a", 10**9]}, "content.1"),
        ("/detokenize", {"tokens": [-1]}, "tokens.0"),
        ("/detokenize", {"tokens": "1 2"}, "tokens"),
        ("/tokenize", {"content": 5}, "content"),
        ("/tokenize", {"content": "a", "with_piece": True}, "with_piece"),
        ("/tokenize", {}, "content"),
    ],
)
def test_bad_bodies_are_a_400_in_openais_shape(
    server: ServerProcess, path: str, body: dict, param: str
) -> None:
    answer = post(server, path, body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert error["message"]


def test_both_need_the_key(server: ServerProcess) -> None:
    for path, body in (("/tokenize", {"content": "a"}), ("/detokenize", {"tokens": [1]})):
        assert post(server, path, body, key=None).status_code == 401
        assert post(server, path, body, key="wrong").status_code == 401
