"""The plan page: every exact pair as the live worker sees it, with its reason, and the service's downloads; what
it shows equals what the planner decides from the same database."""

from __future__ import annotations

import pytest

from dashboard import plan_queries, queries

from registry.domain.memory import GIB
from registry.domain.plan import WorkerCapability, plan_pairs
from tests.dashboard.conftest import DFLASH_8B, Seeded, assert_clean, frame_with, point_dashboard_at, run_page

WORKER = WorkerCapability("gpu-1", "cuda: NVIDIA H200", 141 * GIB, {"pytorch": "torch 2.13"}, 100 * GIB,
                          run_bytes_per_parameter=2.0)


def test_without_a_live_worker_the_page_says_how_to_get_one(dashboard_db: Seeded) -> None:
    app = run_page("plan")
    assert_clean(app)
    assert any("No live worker" in info.value for info in app.info)


def test_the_page_lists_every_pair_with_the_planners_state_and_reason(
        dashboard_db: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    dashboard_db.store.workers.register_worker(WORKER, host="h")
    dashboard_db.store.downloads.start_download(DFLASH_8B, "d" * 40, "/downloads/x", 2 * GIB)
    dashboard_db.store.downloads.progress(DFLASH_8B, "d" * 40, GIB)
    point_dashboard_at(dashboard_db.url, monkeypatch)
    app = run_page("plan")
    assert_clean(app)
    expected = plan_pairs(dashboard_db.store.plan_facts.plan_inputs(), WORKER)
    assert expected
    shown = frame_with(app, "reason")
    assert list(zip(shown["drafter"], shown["target"], shown["state"], shown["reason"])) == [
        (row.drafter, row.target, row.state, row.reason) for row in expected]
    assert "cuda: NVIDIA H200 with 141.0 GiB" in app.caption[0].value
    downloads = frame_with(app, "done_gib")
    assert list(downloads["status"]) == ["downloading"] and list(downloads["done_gib"]) == [1.0]


def test_the_plan_reads_through_the_dashboards_read_only_engine_on_both_backends(seeded: Seeded) -> None:
    seeded.store.workers.register_worker(WORKER, host="h")
    db = queries.ReadOnlyQueries(seeded.url)
    try:
        view = plan_queries.plan_view(db)
    finally:
        db.close()
    expected = plan_pairs(seeded.store.plan_facts.plan_inputs(), WORKER)
    assert view.worker == WORKER and list(view.pairs["state"]) == [row.state for row in expected]
    assert sum(view.counts.values()) == len(expected) > 0
