"""`POST /tokenize` and `POST /detokenize` in llama-server's shapes (tools/server/README.md):
text to token ids (with each token's piece on request) and back. Pure, over the model's
tokenizer."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, StrictBool, StrictStr

from reame.api.errors import ApiError
from reame.api.schemas import STRICT, TokenIdValue

# NOTE: what a body may name, as llama-server's tokenize_mixed takes it: text, or a list of
# texts and token ids; the body cap (max_body_bytes) bounds the work
MixedPart = StrictStr | TokenIdValue


class TokenizeRequest(BaseModel):
    model_config = STRICT
    content: StrictStr | list[MixedPart]
    add_special: StrictBool = False
    parse_special: StrictBool = True
    with_pieces: StrictBool = False


class DetokenizeRequest(BaseModel):
    model_config = STRICT
    tokens: list[TokenIdValue]


class Tokenizer(Protocol):
    vocab_size: int

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]: ...
    def special_piece(self, token: int) -> bytes: ...


def tokenize(tokenizer: Tokenizer, body: TokenizeRequest) -> dict[str, object]:
    """{"tokens": ids}, or with_pieces {"tokens": [{"id", "piece"}]}: a piece that is no
    whole UTF-8 text is its byte values (as llama-server gives it)."""
    parts = [body.content] if isinstance(body.content, str) else body.content
    ids: list[int] = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            add = body.add_special and i == 0  # NOTE: a BOS at the start only
            ids += tokenizer.tokenize(part, add, body.parse_special)
        else:
            ids.append(_checked(tokenizer, part, f"content.{i}"))
    if not body.with_pieces:
        return {"tokens": ids}
    return {"tokens": [{"id": t, "piece": _piece(tokenizer.special_piece(t))} for t in ids]}


def detokenize(tokenizer: Tokenizer, body: DetokenizeRequest) -> dict[str, object]:
    """{"content": text}: the tokens' pieces, special tokens' names included (llama-server's
    tokens_to_str); bytes that are no whole UTF-8 text become U+FFFD."""
    data = b"".join(
        tokenizer.special_piece(_checked(tokenizer, t, f"tokens.{i}"))
        for i, t in enumerate(body.tokens)
    )
    return {"content": data.decode("utf-8", "replace")}


def _checked(tokenizer: Tokenizer, token: int, param: str) -> int:
    if not 0 <= token < tokenizer.vocab_size:
        raise ApiError(
            400,
            f"token id {token} is not in the vocabulary (0 to {tokenizer.vocab_size - 1})",
            param,
            "invalid_value",
        )
    return token


def _piece(data: bytes) -> str | list[int]:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return list(data)
