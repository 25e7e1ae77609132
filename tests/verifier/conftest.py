"""Verifier fixtures: tiny real models built once per session into a cache keyed by builder source + settings.

The cache lives in $DRAFTERS_TEST_CACHE (default <repo>/.cache/test-models) so later sessions reuse the builds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from verifier.loading import LoadedTarget, load_target
from verifier.tiny.qwen3 import cached_draft_lm, cached_target

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    # Tiny models on a shared 2-core machine: OpenMP threads spin against other processes and run
    # an order of magnitude slower than one thread.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def model_cache() -> Path:
    return Path(os.environ.get("DRAFTERS_TEST_CACHE", REPO_ROOT / ".cache" / "test-models"))


@pytest.fixture(scope="session")
def tiny_target_dir(model_cache: Path) -> Path:
    return cached_target(model_cache)


@pytest.fixture(scope="session")
def tiny_draft_lm_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    return cached_draft_lm(model_cache, tiny_target_dir, trained=True)


@pytest.fixture(scope="session")
def untrained_draft_lm_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
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
    from verifier.tiny.architectures import cached_random_draft_lm

    return cached_random_draft_lm(model_cache)


@pytest.fixture(scope="session")
def tiny_target(tiny_target_dir: Path) -> LoadedTarget:
    """The tiny target loaded on CPU; shared, so tests must not modify it."""
    return load_target(tiny_target_dir, device="cpu")
