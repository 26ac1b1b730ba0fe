"""Synthetic GGUF models: the exact layer shapes of real models, filled with random weights.

No model bigger than 270M parameters can be fetched where Reame is benchmarked, so the bench
builds GGUF files with the layer shapes of real models (Qwen2.5, Qwen3, Qwen3.5, OLMoE 1B-7B),
random weights quantized as the real models are, and a real tokenizer (SmolLM2's). Their cost
structure (step time, batch cost, prefill, KV state size) is that of the real model.

The text such a model generates is noise: its weights are random. Only its speed means anything.

The vocabulary is SmolLM2's (49152 tokens), not the real model's: this changes the size of the
embedding and output matrices only (every other tensor has the real model's shape).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import gguf
import numpy as np
import structlog

from reame.errors import ConfigError
from reame.llama.quantize import QUANT_TYPES, quantize_file
from reame_bench.gguf_tokenizer import (
    tokenizer_fields,
    tokenizer_source,
    tokenizer_vocab_size,
    vocab_size,
)
from reame_bench.synthetic_shapes import SHAPES, SyntheticShape, shape_of
from reame_bench.synthetic_tensors import Tensor, tensors

# NOTE: SHAPES, SyntheticShape and shape_of are re-exported: callers import them from here
__all__ = [
    "SHAPES",
    "SyntheticShape",
    "build_synthetic",
    "describe",
    "shape_of",
    "synthetic_path",
    "write_f16",
]

log = structlog.get_logger("reame_bench.synthetic")

_WEIGHT_STD = 0.02
_SEED = 20240601
_CHUNK = 1 << 24  # values generated at once: bounds the float32 scratch to 64 MiB
_GGUF_MAGIC = b"GGUF"


def synthetic_path(name: str, cache_dir: Path, quant: str = "Q4_K_M") -> Path:
    return cache_dir / f"synthetic-{name}-{quant}.gguf"


def build_synthetic(name: str, cache_dir: Path, num_threads: int, quant: str = "Q4_K_M") -> Path:
    """The quantized synthetic GGUF of `name` in cache_dir, built first if it is not there.

    Its weights are random, so its output text is noise; only its speed means anything. An
    interrupted build leaves nothing at the final name (the file is renamed into place whole).
    """
    shape = shape_of(name)
    if quant not in QUANT_TYPES:
        raise ConfigError(f"unknown quantization {quant!r}; known: {', '.join(QUANT_TYPES)}")
    final = synthetic_path(name, cache_dir, quant)
    if _is_gguf(final):
        log.info("synthetic model cached", name=name, path=str(final))
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    _build(name, shape, final, num_threads, quant)
    return final


def describe(name: str) -> str:
    """The shape of a synthetic model as one line of text for the bench output."""
    s = shape_of(name)
    vocab = tokenizer_vocab_size()
    params = sum(int(np.prod(t.shape)) for t in tensors(s, vocab))
    if s.experts:
        unused = (s.experts - s.experts_used) * 3 * s.ffn * s.hidden * s.layers
        ffn = f"{s.experts} experts ({s.experts_used} used) of ffn {s.ffn}"
        size = f"{params / 1e9:.2f}B params ({(params - unused) / 1e9:.2f}B active)"
    else:
        ffn, size = f"ffn {s.ffn}", f"{params / 1e9:.2f}B params"
    real_vocab = f"; the real model has {s.real_vocab}" if s.real_vocab != vocab else ""
    attention_layers = sum(s.is_full_attention(i) for i in range(s.layers))
    kv_bytes = 2 * attention_layers * s.kv_heads * s.head_dim * 2  # K and V, f16 cache
    if s.is_hybrid:
        ffn += (
            f"; hybrid: {s.layers - attention_layers} gated delta net layers (a recurrent "
            f"state each) and {attention_layers} full attention"
        )
    return (
        f"{name} (synthetic: random weights, output text is noise): {s.arch}, {s.layers} layers, "
        f"hidden {s.hidden}, {ffn}, {s.heads} heads / {s.kv_heads} kv heads x {s.head_dim}, "
        f"{'tied' if s.tied_embeddings else 'untied'} embeddings, vocab {vocab} "
        f"(SmolLM2's{real_vocab}), {size}, KV {kv_bytes / 1024:.0f} KiB/token"
    )


def _is_gguf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == _GGUF_MAGIC
    except OSError:
        return False


def _build(name: str, shape: SyntheticShape, final: Path, num_threads: int, quant: str) -> None:
    # NOTE: temporary names in the same directory so the last step is one atomic rename
    f16 = final.with_name(f".{final.stem}.{os.getpid()}.f16.tmp")
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    started = time.perf_counter()
    try:
        write_f16(name, shape, f16)
        log.info("quantizing synthetic model", name=name, quant=quant, threads=num_threads)
        quantize_file(f16, tmp, quant, num_threads)
        f16.unlink()
        _fsync(tmp)
        os.replace(tmp, final)
    finally:
        f16.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    log.info(
        "synthetic model built",
        name=name,
        path=str(final),
        mb=round(final.stat().st_size / 1e6),
        seconds=round(time.perf_counter() - started, 1),
    )


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_f16(name: str, shape: SyntheticShape, path: Path, seed: int = _SEED) -> None:
    """Write an unquantized GGUF (F16 matrices, F32 norms and biases) of random weights,
    streaming one tensor at a time so memory stays near the size of the largest tensor."""
    fields = tokenizer_fields(tokenizer_source())
    vocab = vocab_size(fields)
    layout = tensors(shape, vocab)
    writer = gguf.GGUFWriter(path, shape.arch)
    try:
        _add_metadata(writer, name, shape)
        for field in fields:
            writer.add_key_value(field.key, field.value, field.vtype, sub_type=field.sub_type)
        for t in layout:
            writer.add_tensor_info(t.name, t.shape, np.dtype(t.dtype), t.nbytes)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        _write_tensors(writer, name, layout, seed)
    finally:
        writer.close()


def _write_tensors(writer: gguf.GGUFWriter, name: str, layout: list[Tensor], seed: int) -> None:
    total = sum(t.nbytes for t in layout)
    done = 0
    next_report = 0.0
    started = time.perf_counter()
    for index, t in enumerate(layout):
        writer.write_tensor_data(_values(t, np.random.default_rng([seed, index])))
        done += t.nbytes
        if done / total >= next_report:
            log.info(
                "writing synthetic f16",
                name=name,
                percent=round(100 * done / total),
                mb=round(done / 1e6),
                seconds=round(time.perf_counter() - started, 1),
            )
            next_report = math.floor(10 * done / total) / 10 + 0.1


def _values(t: Tensor, rng: np.random.Generator) -> np.ndarray:
    if t.kind == "norm":
        return np.ones(t.shape, dtype=np.float32)
    if t.kind == "decay":
        return -np.ones(t.shape, dtype=np.float32)
    if t.kind in ("bias", "router"):
        return rng.standard_normal(t.shape, dtype=np.float32) * np.float32(_WEIGHT_STD)
    out = np.empty(t.shape, dtype=np.float16)
    flat = out.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        part = rng.standard_normal(min(_CHUNK, flat.size - start), dtype=np.float32)
        part *= _WEIGHT_STD
        flat[start : start + part.size] = part
    return out


def _add_metadata(writer: gguf.GGUFWriter, name: str, s: SyntheticShape) -> None:
    writer.add_type("model")
    writer.add_name(f"synthetic-{name}")
    writer.add_description(
        f"Random weights with the layer shapes of {name} for benchmarks; its text is noise"
    )
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_context_length(s.context_length)
    writer.add_embedding_length(s.hidden)
    writer.add_block_count(s.layers)
    writer.add_feed_forward_length(s.ffn)
    writer.add_head_count(s.heads)
    writer.add_head_count_kv(s.kv_heads)
    writer.add_key_length(s.head_dim)
    writer.add_value_length(s.head_dim)
    writer.add_rope_dimension_count(s.head_dim)
    writer.add_rope_freq_base(s.rope_theta)
    writer.add_layer_norm_rms_eps(s.rms_eps)
    if s.experts:
        writer.add_expert_count(s.experts)
        writer.add_expert_used_count(s.experts_used)
        writer.add_expert_feed_forward_length(s.ffn)
    if s.is_hybrid:
        writer.add_full_attention_interval(s.full_attention_interval)
        writer.add_rope_dimension_sections([s.head_dim // 8, s.head_dim // 8, s.head_dim // 4, 0])
        writer.add_ssm_conv_kernel(s.ssm_conv)
        writer.add_ssm_state_size(s.ssm_state)
        writer.add_ssm_group_count(s.ssm_groups)
        writer.add_ssm_time_step_rank(s.ssm_v_heads)
        writer.add_ssm_inner_size(s.ssm_state * s.ssm_v_heads)
