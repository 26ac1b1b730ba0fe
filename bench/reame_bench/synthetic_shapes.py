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
    qk_norm_per_head: bool = False  # one norm of head_dim shared by the heads (Qwen3), not of q
    experts: int = 0
    experts_used: int = 0
    # hybrid (qwen35): linear-attention layers (a gated delta net keeping a recurrent state)
    # with a full-attention layer every `full_attention_interval`
    full_attention_interval: int = 0
    ssm_conv: int = 0  # the causal convolution's kernel
    ssm_state: int = 0  # head size of the linear attention's keys and values
    ssm_groups: int = 0  # its key heads
    ssm_v_heads: int = 0  # its value heads

    @property
    def is_hybrid(self) -> bool:
        return self.full_attention_interval > 0

    def is_full_attention(self, layer: int) -> bool:
        return not self.is_hybrid or (layer + 1) % self.full_attention_interval == 0


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
    # Qwen3 (its config.json): Qwen2.5's layout without the qkv bias, with an RMS norm of each
    # head's query and key
    "qwen3-8b": SyntheticShape(
        arch="qwen3",
        layers=36,
        hidden=4096,
        ffn=12288,
        heads=32,
        kv_heads=8,
        head_dim=128,
        rope_theta=1e6,
        rms_eps=1e-6,
        context_length=40960,
        real_vocab=151936,
        qk_norm=True,
        qk_norm_per_head=True,
    ),
    "qwen3-1.7b": SyntheticShape(
        arch="qwen3",
        layers=28,
        hidden=2048,
        ffn=6144,
        heads=16,
        kv_heads=8,
        head_dim=128,
        rope_theta=1e6,
        rms_eps=1e-6,
        context_length=40960,
        real_vocab=151936,
        tied_embeddings=True,
        qk_norm=True,
        qk_norm_per_head=True,
    ),
    "qwen3-tiny": SyntheticShape(
        arch="qwen3",
        layers=2,
        hidden=256,
        ffn=512,
        heads=4,
        kv_heads=2,
        head_dim=64,
        rope_theta=1e6,
        rms_eps=1e-6,
        context_length=4096,
        real_vocab=151936,
        tied_embeddings=True,
        qk_norm=True,
        qk_norm_per_head=True,
    ),
    # Qwen3.5's text model (its config.json's text_config): 3 gated delta net layers to 1 full
    # attention (with a gated query), head 256, linear attention heads of 128
    "qwen3.5-2b": SyntheticShape(
        arch="qwen35",
        layers=24,
        hidden=2048,
        ffn=6144,
        heads=8,
        kv_heads=2,
        head_dim=256,
        rope_theta=1e7,
        rms_eps=1e-6,
        context_length=262144,
        real_vocab=248320,
        tied_embeddings=True,
        qk_norm=True,
        full_attention_interval=4,
        ssm_conv=4,
        ssm_state=128,
        ssm_groups=16,
        ssm_v_heads=16,
    ),
    "qwen3.5-9b": SyntheticShape(
        arch="qwen35",
        layers=32,
        hidden=4096,
        ffn=12288,
        heads=16,
        kv_heads=4,
        head_dim=256,
        rope_theta=1e7,
        rms_eps=1e-6,
        context_length=262144,
        real_vocab=248320,
        qk_norm=True,
        full_attention_interval=4,
        ssm_conv=4,
        ssm_state=128,
        ssm_groups=16,
        ssm_v_heads=32,
    ),
    # loads in a second, for tests of the hybrid paths on a real llama.cpp context: 3 linear
    # attention layers and 1 full attention layer, as Qwen3.5's 3:1
    "qwen3.5-tiny": SyntheticShape(
        arch="qwen35",
        layers=4,
        hidden=256,
        ffn=512,
        heads=4,
        kv_heads=2,
        head_dim=64,
        rope_theta=1e7,
        rms_eps=1e-6,
        context_length=4096,
        real_vocab=248320,
        tied_embeddings=True,
        qk_norm=True,
        full_attention_interval=4,
        ssm_conv=4,
        ssm_state=64,
        ssm_groups=2,
        ssm_v_heads=4,
    ),
}


def shape_of(name: str) -> SyntheticShape:
    try:
        return SHAPES[name]
    except KeyError:
        raise ConfigError(
            f"unknown synthetic model {name!r}; known: {', '.join(sorted(SHAPES))}"
        ) from None
