"""Fixtures of the llama.cpp tests: the installed llama-server, the converter source and the engine's options.

The tiny models these tests run (qwen3_target, draft_lm, random_draft_lm) are fixtures in tests/tiny_models.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.settings import get_settings
from tests.llamacpp import SKIP_VARIABLE
from tests.tiny_models import cache_root
from verifier.engines.llamacpp.install import (
    LlamaCppMissing,
    ServerBinary,
    fetch_llama_cpp_source,
    find_server,
    llama_cpp_source,
)
from verifier.engines.llamacpp.server import LlamaCppOptions


@pytest.fixture(scope="session")
def server_binary() -> ServerBinary:
    try:
        return find_server()
    except LlamaCppMissing as error:
        pytest.fail(f"{error} (or set {SKIP_VARIABLE}=1 to skip the llama.cpp tests)", pytrace=False)


@pytest.fixture(scope="session")
def llama_source(server_binary: ServerBinary) -> Path:
    if os.environ.get("DRAFTERS_LLAMA_CPP_DIR"):
        return llama_cpp_source()
    return fetch_llama_cpp_source(cache_root(), server_binary.version)


@pytest.fixture(scope="session")
def llama_options(llama_source: Path) -> LlamaCppOptions:
    # One thread: the test machine's two cores are shared, and spinning threads slow tiny models down.
    return LlamaCppOptions(threads=1, gguf_cache=cache_root() / "gguf", source_dir=llama_source)


@pytest.fixture
def llama_env(llama_source: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment `drafters verify --engine llamacpp` (and its jobs) read, pointed at the cached pieces."""
    monkeypatch.setenv("DRAFTERS_LLAMA_CPP_DIR", str(llama_source))
    monkeypatch.setenv("DRAFTERS_MODELS_DIR", str(cache_root()))
    monkeypatch.setenv("DRAFTERS_LLAMACPP_THREADS", "1")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
