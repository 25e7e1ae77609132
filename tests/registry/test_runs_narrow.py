"""`drafters runs` in the terminal a person has: the wide table from 120 columns, and below that each run as a few
labelled lines that fit 80 columns, with the same numbers and a failed run's reason in full."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from registry.store import Store
from registry.store.runs import record_run
from tests.registry.run_fixtures import full_run
from tests.support.cli import drafters

REASON = "CUDA out of memory while loading the drafter (12 GiB card)"


def runs_output(env: dict[str, str], columns: int) -> list[str]:
    result = drafters("runs", env=env, columns=columns)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    store = Store.open(url)
    run = record_run(store, full_run(run_id="a" * 32))
    record_run(store, replace(run, status="failed", failure_reason=REASON, overall=None, per_set=(),
                              run_id="f" * 32, prediction=None))
    store.engine.dispose()
    return {"DRAFTERS_DATABASE_URL": url, "DRAFTERS_HOME": str(tmp_path / "home")}


def test_runs_fit_80_columns_with_every_number_and_the_whole_reason(env: dict[str, str]) -> None:
    lines = runs_output(env, 80)
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    text = "\n".join(lines)
    for shown in ("aaaaaaaaaaaa", "τ 2.90 (emitted 3.15)", "accept 0.63", "tok/s 90.0 (base 50.0)",
                  "speedup 1.70 (1.60-1.80, n=3)", "efficiency 0.75", "peak mem 118 MiB", "metrics v3",
                  f"failed: {REASON}"):
        assert shown in text, shown


def test_a_wide_terminal_gets_the_table(env: dict[str, str]) -> None:
    text = "\n".join(runs_output(env, 300))
    assert "τ emitted" in text and "speedup (min-max)" in text and "1.70 (1.60-1.80, n=3)" in text
    assert f"failed: {REASON}" in text
