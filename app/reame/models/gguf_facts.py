"""What Reame needs to know of a GGUF file before loading it: read from its header only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gguf import GGUFReader

from reame.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"


@dataclass(slots=True, frozen=True)
class ModelFacts:
    path: Path
    architecture: str
    name: str
    file_size: int
    context_train: int
    num_layers: int
    kv_bytes_per_token: int  # f16 K and V over all layers
    has_chat_template: bool


def check_magic(path: Path) -> None:
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelLoadError(f"cannot read model file {path}: {exc.strerror}") from exc
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path} is not a GGUF file (it starts with {magic!r}, not {GGUF_MAGIC!r}); "
            "re-download it (`reame pull MODEL`) or point model_path at a .gguf file"
        )


def read_facts(path: Path) -> ModelFacts:
    check_magic(path)
    try:
        reader = GGUFReader(path, "r")
    except (ValueError, OSError, IndexError, KeyError) as exc:
        raise ModelLoadError(f"{path} is a damaged GGUF file ({exc}); re-download it") from exc

    def value(key: str, default: object = None) -> object:
        field = reader.fields.get(key)
        return field.contents() if field is not None else default

    arch = str(value("general.architecture", "unknown"))
    num_layers = int(value(f"{arch}.block_count", 0))
    num_embd = int(value(f"{arch}.embedding_length", 0))
    num_heads = int(value(f"{arch}.attention.head_count", 1) or 1)
    num_kv_heads = value(f"{arch}.attention.head_count_kv", num_heads)
    if isinstance(num_kv_heads, list):  # per-layer counts in some architectures
        num_kv_heads = max(num_kv_heads)
    head_dim_k = int(value(f"{arch}.attention.key_length", num_embd // num_heads))
    head_dim_v = int(value(f"{arch}.attention.value_length", num_embd // num_heads))
    return ModelFacts(
        path=path,
        architecture=arch,
        name=str(value("general.name", path.stem)),
        file_size=path.stat().st_size,
        context_train=int(value(f"{arch}.context_length", 2048)),
        num_layers=num_layers,
        kv_bytes_per_token=2 * num_layers * int(num_kv_heads) * (head_dim_k + head_dim_v),
        has_chat_template="tokenizer.chat_template" in reader.fields,
    )
