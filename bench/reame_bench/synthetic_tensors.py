"""The tensors of a synthetic GGUF, by architecture: every one llama.cpp's loader for the shape's
architecture expects (qwen2, qwen3, olmoe, qwen35), in numpy shape order (the reverse of ggml's
ne)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf.constants import MODEL_ARCH_NAMES, MODEL_TENSOR, MODEL_TENSORS, TENSOR_NAMES

from reame_bench.synthetic_shapes import SyntheticShape


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    shape: tuple[int, ...]  # numpy order: the reverse of ggml's ne
    # "weight": random f16; "router", "bias": random f32; "norm": ones f32; "decay": -1 f32 (a
    # gated delta net's A, so that its state decays rather than grows)
    kind: str

    @property
    def dtype(self) -> type[np.generic]:
        return np.float16 if self.kind == "weight" else np.float32

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


def tensors(s: SyntheticShape, vocab: int) -> list[Tensor]:
    """Every tensor llama.cpp's loader for s.arch expects, in numpy shape order."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    out = [_tensor(MODEL_TENSOR.TOKEN_EMBD, (vocab, s.hidden))]
    out.append(_tensor(MODEL_TENSOR.OUTPUT_NORM, (s.hidden,), kind="norm"))
    if not s.tied_embeddings:
        out.append(_tensor(MODEL_TENSOR.OUTPUT, (vocab, s.hidden)))
    for i in range(s.layers):
        out.append(_tensor(MODEL_TENSOR.ATTN_NORM, (s.hidden,), i, kind="norm"))
        if s.is_hybrid:
            out += _hybrid_layer(s, i)
            continue
        out += [
            _tensor(MODEL_TENSOR.ATTN_Q, (q, s.hidden), i),
            _tensor(MODEL_TENSOR.ATTN_K, (kv, s.hidden), i),
            _tensor(MODEL_TENSOR.ATTN_V, (kv, s.hidden), i),
        ]
        if s.qkv_bias:
            out += [
                _tensor(MODEL_TENSOR.ATTN_Q, (q,), i, kind="bias"),
                _tensor(MODEL_TENSOR.ATTN_K, (kv,), i, kind="bias"),
                _tensor(MODEL_TENSOR.ATTN_V, (kv,), i, kind="bias"),
            ]
        if s.qk_norm:
            q_norm, k_norm = (s.head_dim, s.head_dim) if s.qk_norm_per_head else (q, kv)
            out += [
                _tensor(MODEL_TENSOR.ATTN_Q_NORM, (q_norm,), i, kind="norm"),
                _tensor(MODEL_TENSOR.ATTN_K_NORM, (k_norm,), i, kind="norm"),
            ]
        out.append(_tensor(MODEL_TENSOR.ATTN_OUT, (s.hidden, q), i))
        out.append(_tensor(MODEL_TENSOR.FFN_NORM, (s.hidden,), i, kind="norm"))
        out += _ffn_tensors(s, i)
    _check_known(s.arch, out)
    return out


def _hybrid_layer(s: SyntheticShape, i: int) -> list[Tensor]:
    """A qwen35 layer after its attn_norm: full attention (a gated query: twice the rows) or a
    gated delta net, then the post-attention norm and the FFN (llama.cpp's qwen35 loader)."""
    out = []
    if s.is_full_attention(i):
        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        out += [
            _tensor(MODEL_TENSOR.ATTN_Q, (2 * q, s.hidden), i),
            _tensor(MODEL_TENSOR.ATTN_K, (kv, s.hidden), i),
            _tensor(MODEL_TENSOR.ATTN_V, (kv, s.hidden), i),
            _tensor(MODEL_TENSOR.ATTN_OUT, (s.hidden, q), i),
            _tensor(MODEL_TENSOR.ATTN_Q_NORM, (s.head_dim,), i, kind="norm"),
            _tensor(MODEL_TENSOR.ATTN_K_NORM, (s.head_dim,), i, kind="norm"),
        ]
    else:
        key_dim, value_dim = s.ssm_state * s.ssm_groups, s.ssm_state * s.ssm_v_heads
        conv_dim = 2 * key_dim + value_dim
        out += [
            _tensor(MODEL_TENSOR.ATTN_QKV, (conv_dim, s.hidden), i),
            _tensor(MODEL_TENSOR.ATTN_GATE, (value_dim, s.hidden), i),
            _tensor(MODEL_TENSOR.SSM_CONV1D, (conv_dim, s.ssm_conv), i, kind="router"),
            _tensor(MODEL_TENSOR.SSM_DT, (s.ssm_v_heads,), i, kind="bias"),
            _tensor(MODEL_TENSOR.SSM_A, (s.ssm_v_heads,), i, kind="decay"),
            _tensor(MODEL_TENSOR.SSM_BETA, (s.ssm_v_heads, s.hidden), i),
            _tensor(MODEL_TENSOR.SSM_ALPHA, (s.ssm_v_heads, s.hidden), i),
            _tensor(MODEL_TENSOR.SSM_NORM, (s.ssm_state,), i, kind="norm"),
            _tensor(MODEL_TENSOR.SSM_OUT, (s.hidden, value_dim), i),
        ]
    out.append(_tensor(MODEL_TENSOR.ATTN_POST_NORM, (s.hidden,), i, kind="norm"))
    return out + _ffn_tensors(s, i)


def _ffn_tensors(s: SyntheticShape, i: int) -> list[Tensor]:
    if not s.experts:
        return [
            _tensor(MODEL_TENSOR.FFN_GATE, (s.ffn, s.hidden), i),
            _tensor(MODEL_TENSOR.FFN_UP, (s.ffn, s.hidden), i),
            _tensor(MODEL_TENSOR.FFN_DOWN, (s.hidden, s.ffn), i),
        ]
    # NOTE: the router is f32 as in real files (convert_hf_to_gguf keeps it f32, unquantized)
    return [
        _tensor(MODEL_TENSOR.FFN_GATE_INP, (s.experts, s.hidden), i, kind="router"),
        _tensor(MODEL_TENSOR.FFN_GATE_EXP, (s.experts, s.ffn, s.hidden), i),
        _tensor(MODEL_TENSOR.FFN_UP_EXP, (s.experts, s.ffn, s.hidden), i),
        _tensor(MODEL_TENSOR.FFN_DOWN_EXP, (s.experts, s.hidden, s.ffn), i),
    ]


def _tensor(
    kind_of: MODEL_TENSOR, shape: tuple[int, ...], layer: int = 0, kind: str = "weight"
) -> Tensor:
    base = TENSOR_NAMES[kind_of].format(bid=layer)
    if kind_of == MODEL_TENSOR.SSM_A:  # NOTE: llama.cpp names it without a suffix
        return Tensor(base, shape, kind)
    suffix = "bias" if kind == "bias" else "weight"
    return Tensor(f"{base}.{suffix}", shape, kind)


def _check_known(arch: str, tensors: list[Tensor]) -> None:
    arch_id = next(a for a, n in MODEL_ARCH_NAMES.items() if n == arch)
    known = {TENSOR_NAMES[t] for t in MODEL_TENSORS[arch_id]}
    for t in tensors:
        base = t.name.rsplit(".", 1)[0] if t.name.endswith(("weight", "bias")) else t.name
        pattern = base if not base.startswith("blk.") else "blk.{bid}." + base.split(".", 2)[2]
        if pattern not in known:
            raise ValueError(f"{arch} has no tensor {t.name} in gguf-py's constants")
