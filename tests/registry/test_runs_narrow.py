"""`drafters runs` in the terminal a person has: the wide table where it fits with no word broken, and otherwise
each run as a few labelled lines, with the same numbers and a failed run's reason in full (never called a baseline)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from registry.store import Store
from tests.registry.run_fixtures import full_run
from tests.support.cli import drafters

REASON = "CUDA out of memory while loading the drafter (12 GiB card)"
# Ids as long as the Hub's: they must never be broken across lines.
DRAFTER, TARGET = "RedHatAI/Qwen3-235B-A22B-Instruct-2507-speculator.eagle3", "Qwen/Qwen3-235B-A22B-Instruct-2507"


def runs_output(env: dict[str, str], columns: int) -> list[str]:
    result = drafters("runs", env=env, columns=columns)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    store = Store.open(url)
    run = store.runs.record_run(replace(full_run(run_id="a" * 32), drafter=DRAFTER, target=TARGET))
    # As verify stores a failure before the drafter's method is read: no method.
    store.runs.record_run(replace(run, status="failed", failure_reason=REASON, overall=None, per_set=(),
                                  run_id="f" * 32, prediction=None, method=None))
    store.engine.dispose()
    return {"DRAFTERS_DATABASE_URL": url, "DRAFTERS_HOME": str(tmp_path / "home")}


@pytest.mark.parametrize("columns", [80, 120])
def test_runs_fit_the_terminal_with_every_number_and_the_whole_reason(env: dict[str, str], columns: int) -> None:
    lines = runs_output(env, columns)
    assert all(len(line) <= columns for line in lines), max(lines, key=len)
    text = "\n".join(lines)
    for shown in ("aaaaaaaaaaaa", "τ 2.90 (emitted 3.15)", "accept 0.63", "tok/s 90.0 (base 50.0)",
                  "speedup 1.70 (range 1.60–1.80, n=3)", "efficiency 0.75", "peak mem 118 MiB", "metrics v3",
                  f"failed: {REASON}"):
        assert shown in text, shown
    for name, parts in ((DRAFTER, ("RedHatAI", "speculator")), (TARGET, ("Qwen/Qwen3",))):
        shown = [line for line in lines if any(part in line for part in parts)]
        assert shown and all(name in line for line in shown), (name, text)  # whole wherever a part of it shows
    # The failed run stopped before anything was measured: it is no baseline, and its spread is a range, not "±".
    [failed] = [line for line in lines if line.startswith("ffffffffffff")]
    assert "baseline" not in failed and "±" not in text


def test_a_wide_terminal_gets_the_table(env: dict[str, str]) -> None:
    lines = runs_output(env, 300)
    text = "\n".join(lines)
    assert "τ emitted" in text and "speedup (range)" in text and "1.70 (range 1.60–1.80, n=3)" in text
    assert f"failed: {REASON}" in text and "±" not in text
    # The failure is on a line of its own under the table, not folded into one of its cells.
    assert any(line.strip() == f"failed: {REASON}" for line in lines)
