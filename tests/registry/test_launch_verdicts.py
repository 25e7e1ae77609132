"""`drafters launch` serves exact pairs and the declared ones a user can rely on, and labels the declared ones."""

from __future__ import annotations

from pathlib import Path

from registry.store import Store
from tests.support.cli import drafters


def test_launch_prints_a_declared_catalog_pair_labelled_as_declared(isolated_env: Path) -> None:
    assert drafters("catalog", "load").returncode == 0
    store = Store.open(f"sqlite:///{isolated_env / 'registry.db'}")
    verdicts = store.reads.verdicts()
    store.engine.dispose()
    declared = sorted((v.checkpoint_repo_id, v.drafter_repo_id) for v in verdicts if v.verdict == "declared"
                      and v.method == "dflash")
    exact = sorted((v.checkpoint_repo_id, v.drafter_repo_id) for v in verdicts if v.verdict == "exact"
                   and v.method == "dflash")
    assert declared and exact
    for (target, drafter), label in ((declared[0], True), (exact[0], False)):
        shown = drafters("launch", target, "--engine", "vllm", "--drafter", drafter)
        assert shown.returncode == 0, shown.stderr
        [header] = [line for line in shown.stdout.splitlines() if line.startswith(drafter)]
        assert ("[declared by its publisher; configs not checked" in header) is label
