"""An installed copy carries everything the code reads from its own package: migrations, catalog, prompts, pages."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO_ROOT


def test_wheel_carries_data_files(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(REPO_ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = tmp_path.glob("drafter_registry-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        "migrations/env.py",
        "migrations/script.py.mako",
        "migrations/versions/0001_core_registry_schema.py",
        "registry/data/catalog.json",
        "registry/data/gpus.json",
        "registry/data/published_acceptance.json",
        "registry/data/public_lists.json",
        "verifier/prompt_sets/code.jsonl",
        "verifier/tiny/corpus.txt",
        "dashboard/app.py",
        "dashboard/views/overview.py",
        "drafters/cli/__init__.py",
    }
    assert expected <= names, sorted(expected - names)
    assert not any(name.startswith("tests/") for name in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "drafters = drafters.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
