"""The layer shapes of the real models that synthetic GGUF models copy (see synthetic.py)."""

from __future__ import annotations

from dataclasses import dataclass

from reame.errors import ConfigError


@dataclass(frozen=True, slots=True)
class SyntheticShape:
    """The shape of a real model's layers (what its cost depends on)."""

    arch: str  # llama.cpp's architecture name
    layers: int
    hidden: int
    ffn: int  # per expert for a mixture of experts
    heads: int
    kv_heads: int
    head_dim: int
    rope_theta: float
    rms_eps: float
    context_length: int
    real_vocab: int  # the real model's, for describe(): the synthetic file uses SmolLM2's
    tied_embeddings: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    experts: int = 0
    experts_used: int = 0


SHAPES: dict[str, SyntheticShape] = {
    "qwen2.5-1.5b": SyntheticShape(
        arch="qwen2",
        layers=28,
        hidden=1536,
        ffn=8960,
        heads=12,
        kv_heads=2,
        head_dim=128,
        rope_theta=1e6,
        rms_eps=1e-6,
        context_length=32768,
        real_vocab=151936,
        tied_embeddings=True,
        qkv_bias=True,
    ),
    "qwen2.5-7b": SyntheticShape(
        arch="qwen2",
        layers=28,
        hidden=3584,
        ffn=18944,
        heads=28,
        kv_heads=4,
        head_dim=128,
        rope_theta=1e6,
        rms_eps=1e-6,
        context_length=32768,
        real_vocab=152064,
        qkv_bias=True,
    ),
    "olmoe-1b-7b": SyntheticShape(
        arch="olmoe",
        layers=16,
        hidden=2048,
        ffn=1024,
        heads=16,
        kv_heads=16,
        head_dim=128,
        rope_theta=1e4,
        rms_eps=1e-5,
        context_length=4096,
        real_vocab=50304,
        qk_norm=True,
        experts=64,
        experts_used=8,
    ),
    "test-tiny": SyntheticShape(
        arch="qwen2",
        layers=2,
        hidden=256,
        ffn=512,
        heads=4,
        kv_heads=2,
        head_dim=64,
        rope_theta=1e6,
        rms_eps=1e-6,
        context_length=4096,
        real_vocab=49152,
        tied_embeddings=True,
        qkv_bias=True,
    ),
}


def shape_of(name: str) -> SyntheticShape:
    try:
        return SHAPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown synthetic model {name!r}; known: {', '.join(sorted(SHAPES))}"
        ) from None
