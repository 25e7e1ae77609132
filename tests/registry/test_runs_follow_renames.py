"""A renamed checkpoint keeps one run history, as a renamed drafter does: runs recorded under its old id (before the
move, or by a job queued before it that finishes after) are found under either id and stored under the new one;
migration 0008 moves runs that older code left under an old id."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from registry.domain.run import Run
from registry.hub import HubClient
from registry.store import Store, db
from registry.watch.poller import Watcher
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
OLD, NEW = "meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"


def _watcher(store: Store, hub: FakeHub, tmp_path: Path) -> Watcher:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05, max_rate_limit_wait=2.0)
    return Watcher(store, client, ORGS)


def test_runs_under_a_checkpoints_old_id_follow_its_rename(store: Store, scenario: Scenario, hub: FakeHub,
                                                           tmp_path: Path) -> None:
    watcher = _watcher(store, hub, tmp_path)
    watcher.poll_once()
    assert store.reads.get_checkpoint(OLD) is not None and store.reads.get_checkpoint(NEW) is None
    store.runs.record_run(Run(target=OLD, drafter="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", run_id="before"))
    scenario.advance("repo_renamed")
    assert not watcher.poll_once().errors
    assert store.reads.get_checkpoint(NEW) is not None and store.reads.get_checkpoint(NEW).repo_id == NEW  # type: ignore[union-attr]
    # A job queued under the old id that finishes after the move lands in the same history.
    assert store.runs.record_run(Run(target=OLD, drafter=None, run_id="after")).target == NEW
    assert store.runs.get_run("before").target == NEW  # type: ignore[union-attr]
    for asked in (OLD, NEW):
        assert sorted(r.run_id for r in store.runs.list_runs(target=asked)) == ["after", "before"]


def test_migration_0008_moves_runs_left_under_an_old_id(database_url: str) -> None:
    engine = db.make_engine(database_url)
    db.upgrade(engine, "0007_run_measurement_json")
    now = datetime(2026, 4, 1, tzinfo=UTC)
    meta = sa.MetaData()
    meta.reflect(engine, only=["checkpoint", "checkpoint_alias", "drafter", "drafter_alias", "benchmark_run"])
    tables = meta.tables
    with engine.begin() as connection:
        checkpoint_id = connection.execute(tables["checkpoint"].insert().values(
            repo_id=NEW, org="meta-llama", kind="base", gated=False, status="ok", source="hub",
            first_seen=now)).inserted_primary_key[0]
        connection.execute(tables["checkpoint_alias"].insert().values(alias=OLD, checkpoint_id=checkpoint_id))
        drafter_id = connection.execute(tables["drafter"].insert().values(
            repo_id="z-lab/New-DFlash", method="dflash", publisher="z-lab", gated=False, status="ok", source="hub",
            first_seen=now)).inserted_primary_key[0]
        connection.execute(tables["drafter_alias"].insert().values(alias="z-lab/Old-DFlash", drafter_id=drafter_id))
        for run_id, target, drafter in [("a", OLD, "z-lab/Old-DFlash"), ("b", "Qwen/Qwen3-8B", "z-lab/Other")]:
            connection.execute(tables["benchmark_run"].insert().values(
                run_id=run_id, created_at=now, status="ok", engine="pytorch", target=target, drafter=drafter,
                temperature=0.0, metrics={"metric_version": 2}, provenance={}))
    db.upgrade(engine)
    with engine.connect() as connection:
        rows = connection.execute(sa.select(tables["benchmark_run"].c.run_id, tables["benchmark_run"].c.target,
                                            tables["benchmark_run"].c.drafter)).all()
    engine.dispose()
    assert sorted(tuple(r) for r in rows) == [("a", NEW, "z-lab/New-DFlash"), ("b", "Qwen/Qwen3-8B", "z-lab/Other")]
