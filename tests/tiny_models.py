"""The tiny real models every test folder shares, as session fixtures (a pytest plugin, loaded by tests/conftest.py).

Each model is built once into a cache keyed by its builder's source and settings; the cache lives in
$DRAFTERS_TEST_CACHE (default <repo>/.cache/test-models), so later sessions reuse the builds. The builders need
the verifier extra (torch), so they are imported inside the fixtures: tests that use no model never load torch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from verifier.loading import LoadedTarget

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_root() -> Path:
    """Where the tiny models, GGUF conversions and the llama.cpp converter source are cached."""
    return Path(os.environ.get("DRAFTERS_TEST_CACHE", REPO_ROOT / ".cache" / "test-models"))


@pytest.fixture(scope="session")
def model_cache() -> Path:
    return cache_root()


@pytest.fixture(scope="session")
def tiny_target_dir(model_cache: Path) -> Path:
    """The tiny Qwen3 target."""
    from verifier.tiny.qwen3 import cached_target

    return cached_target(model_cache)


@pytest.fixture(scope="session")
def tiny_draft_lm_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    from verifier.tiny.qwen3 import cached_draft_lm

    return cached_draft_lm(model_cache, tiny_target_dir, trained=True)


@pytest.fixture(scope="session")
def untrained_draft_lm_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    from verifier.tiny.qwen3 import cached_draft_lm

    return cached_draft_lm(model_cache, tiny_target_dir, trained=False)


@pytest.fixture(scope="session")
def tiny_dflash_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    from verifier.tiny.dflash import cached_dflash_drafter

    return cached_dflash_drafter(model_cache, tiny_target_dir, trained=True)


@pytest.fixture(scope="session")
def gemma4_target_dir(model_cache: Path) -> Path:
    from verifier.tiny.gemma4 import cached_gemma4_target

    return cached_gemma4_target(model_cache)


@pytest.fixture(scope="session")
def assistant_dir(model_cache: Path, gemma4_target_dir: Path) -> Path:
    from verifier.tiny.gemma4 import cached_gemma4_assistant

    return cached_gemma4_assistant(model_cache, gemma4_target_dir, trained=True)


@pytest.fixture(scope="session")
def gemma4_dflash_dir(model_cache: Path, gemma4_target_dir: Path) -> Path:
    from verifier.tiny.dflash import cached_dflash_drafter

    return cached_dflash_drafter(model_cache, gemma4_target_dir, trained=True)


@pytest.fixture(scope="session")
def random_llama_draft_dir(model_cache: Path) -> Path:
    """A random 1-layer Llama over the shared tiny tokenizer: its drafts are almost always rejected."""
    from tests.tiny_architectures import cached_random_draft_lm

    return cached_random_draft_lm(model_cache)


@pytest.fixture(scope="module")
def trained_head_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    """A trained EAGLE-3 head (yuhuili's layout) for the tiny target."""
    from verifier.tiny.eagle3 import cached_eagle3_head

    return cached_eagle3_head(model_cache, tiny_target_dir, trained=True)


@pytest.fixture(scope="module")
def random_head_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    from verifier.tiny.eagle3 import cached_eagle3_head

    return cached_eagle3_head(model_cache, tiny_target_dir, trained=False)


@pytest.fixture(scope="session")
def tiny_target(tiny_target_dir: Path) -> "LoadedTarget":
    """The tiny target loaded on CPU; shared, so tests must not modify it."""
    from verifier.loading import load_target

    return load_target(tiny_target_dir, device="cpu")


# The llama.cpp tests' names for the same Qwen3 pair.
@pytest.fixture(scope="session")
def qwen3_target() -> Path:
    from verifier.tiny.qwen3 import cached_target

    return cached_target(cache_root())


@pytest.fixture(scope="session")
def draft_lm(qwen3_target: Path) -> Path:
    from verifier.tiny.qwen3 import cached_draft_lm

    return cached_draft_lm(cache_root(), qwen3_target, trained=True)


@pytest.fixture(scope="session")
def random_draft_lm(qwen3_target: Path) -> Path:
    from verifier.tiny.qwen3 import cached_draft_lm

    return cached_draft_lm(cache_root(), qwen3_target, trained=False)
