"""What a person sees in a terminal: `drafters find` fits 80 columns with the reasons folded under each row, and
an empty value is a dash, never `None`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.cli import drafters as run_drafters


def drafters(*args: str, env: dict[str, str], columns: int = 80) -> subprocess.CompletedProcess[str]:
    return run_drafters(*args, env=env, columns=columns)  # an 80-column terminal unless a test says otherwise


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {"DRAFTERS_HOME": str(tmp_path / "home")}
    assert drafters("catalog", "load", env=values).returncode == 0
    return values


def test_find_fits_80_columns_and_folds_reasons_under_each_row(env: dict[str, str]) -> None:
    result = drafters("find", "Qwen/Qwen3-8B", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    row = next(i for i, line in enumerate(lines) if line.endswith("z-lab/Qwen3-8B-DFlash-b16"))
    assert lines[row].startswith("exact") and "dflash" in lines[row] and "2026-01-05" in lines[row]
    # Its catalog note and its reasons, folded and indented under it.
    folded = []
    for line in lines[row + 1:]:
        if not line.startswith("    "):
            break
        folded.append(line.strip())
    assert folded and folded[0].startswith("note: ") and "declared for Qwen/Qwen3-8B" in " ".join(folded), folded
    # One line per drafter plus its folded reasons, not a cell wrapped over four lines.
    assert sum(1 for line in lines if line.endswith("-DFlash-b16")) == 1


def test_empty_values_print_as_a_dash(env: dict[str, str]) -> None:
    assert drafters("subscribe", "http://127.0.0.1:1/hook", "--unsigned",
                    env={**env, "DRAFTERS_WEBHOOK_ALLOW_INTERNAL": "1"}).returncode == 0
    for args in (("subscriptions",), ("lag",), ("alerts",)):
        result = drafters(*args, env=env, columns=200)
        assert result.returncode == 0, result.stderr
        assert "None" not in result.stdout, (args, result.stdout)
    listed = drafters("subscriptions", env=env, columns=200).stdout
    assert "│ -" in listed  # org, family and repo are empty
