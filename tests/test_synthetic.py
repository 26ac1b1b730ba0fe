"""Synthetic GGUF models: built from shapes, loadable by llama.cpp, cached, never half-built."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from reame.errors import ConfigError
from reame.llama.context import Context, ContextShape
from reame.llama.model import Model
from reame_bench import synthetic
from reame_bench.gguf_tokenizer import tokenizer_source
from reame_bench.synthetic import SHAPES, build_synthetic, describe, synthetic_path

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_synthetic("test-tiny", tmp_path_factory.mktemp("synthetic"), num_threads=2)


def test_tiny_loads_with_smollm2_tokenizer_and_decodes(tiny: Path) -> None:
    assert tiny.name == "synthetic-test-tiny-Q4_K_M.gguf"
    text = "Hello, world! The quick brown fox."
    with Model(tokenizer_source()) as smollm2:
        expected_vocab = smollm2.vocab_size
        expected_tokens = smollm2.tokenize(text)
    with Model(tiny) as model:
        assert model.vocab_size == expected_vocab == 49152
        tokens = model.tokenize(text)
        assert tokens == expected_tokens
        with Context(model, ContextShape(64, 16, 1, 1)) as ctx:
            n = len(tokens)
            ctx.decode(tokens, list(range(n)), [0] * n, [False] * (n - 1) + [True])
            assert np.isfinite(ctx.logits(n - 1)).all()
            token = int(np.argmax(ctx.logits(n - 1)))
            ctx.decode([token], [n], [0], [True])
            assert np.isfinite(ctx.logits(0)).all()


def test_second_build_returns_cached_file(tiny: Path) -> None:
    before = tiny.stat().st_mtime_ns
    again = build_synthetic("test-tiny", tiny.parent, num_threads=2)
    assert again == tiny
    assert again.stat().st_mtime_ns == before


def test_a_file_that_is_not_gguf_is_rebuilt(tmp_path: Path) -> None:
    final = synthetic_path("test-tiny", tmp_path, "Q8_0")
    final.write_bytes(b"not a gguf")
    assert build_synthetic("test-tiny", tmp_path, num_threads=2, quant="Q8_0") == final
    assert final.read_bytes()[:4] == b"GGUF"
    assert sorted(p.name for p in tmp_path.iterdir()) == [final.name]


def test_invalid_quant_fails_before_writing_anything(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="quantization"):
        build_synthetic("test-tiny", tmp_path, num_threads=2, quant="Q3_BOGUS")
    assert list(tmp_path.iterdir()) == []


def test_interrupted_quantization_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(source: Path, target: Path, quant: str, num_threads: int) -> None:
        assert source.read_bytes()[:4] == b"GGUF"  # the f16 file was written
        target.write_bytes(b"GGUF half written")
        raise KeyboardInterrupt

    monkeypatch.setattr(synthetic, "quantize_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_synthetic("test-tiny", tmp_path, num_threads=2)
    assert list(tmp_path.iterdir()) == []


def test_unknown_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown synthetic model"):
        build_synthetic("gpt-5", tmp_path, num_threads=2)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_describe_states_shape_and_noise(name: str) -> None:
    text = describe(name)
    assert name in text and "noise" in text and "vocab 49152" in text


def test_build_only_prints_a_hybrid_models_path_on_the_last_line() -> None:
    from test_cli import reame

    done = reame("bench", "--synthetic", "qwen3.5-tiny", "--build-only")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().splitlines()[-1])
    assert path.is_file() and path.name == "synthetic-qwen3.5-tiny-Q4_K_M.gguf"
    with Model(path) as model:
        assert model.memory_kind == "hybrid" and model.architecture == "qwen35"
    assert "hybrid: 3 gated delta net layers" in describe("qwen3.5-tiny")


def test_build_only_needs_a_shape() -> None:
    from test_cli import assert_one_line_error, reame

    assert_one_line_error(reame("bench", "--build-only"), "--build-only goes with --synthetic")


def test_a_qwen3_shape_loads_as_qwen3_and_its_memory_can_be_cut(tmp_path: Path) -> None:
    """Qwen3's per-head query and key norms (head_dim, not the whole q) are what its loader
    checks: a wrong shape fails to load."""
    path = build_synthetic("qwen3-tiny", tmp_path, num_threads=2)
    with Model(path) as model:
        assert model.architecture == "qwen3" and model.memory_kind == "attention"
        tokens = model.tokenize("The quick brown fox")
        with Context(model, ContextShape(64, 16, 1, 1)) as ctx:
            n = len(tokens)
            ctx.decode(tokens, list(range(n)), [0] * n, [False] * (n - 1) + [True])
            assert np.isfinite(ctx.logits(n - 1)).all()
            assert ctx.can_cut
