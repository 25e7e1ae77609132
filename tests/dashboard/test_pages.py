"""The dashboard: its query layer on SQLite and PostgreSQL, and its pages run by AppTest. What they show equals
what the store holds."""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from statistics import mean, pstdev

import pandas as pd
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
import streamlit as st
from streamlit.testing.v1 import AppTest

import dashboard
from dashboard import data, launch, queries
from registry import calibration, reports
from registry.domain import hub_presence, memory, pricing
from registry.domain.records import CheckpointSpec, DrafterSpec, RevisionSpec
from registry.store import Store
from registry.store.db import head_revision
from registry.store.read_only import open_read_only
from registry.store.read_queries import ReadOnlyQueries
from registry.store.runs import Run
from tests.conftest import REPO_ROOT
from tests.registry.run_fixtures import measured
from tests.dashboard.conftest import (
    CONFIGS,
    DFLASH_8B,
    DRAFTER_SHA,
    EAGLE_8B,
    EAGLE_LLAMA,
    LLAMA,
    PAGE_NAMES,
    QWEN3_4B,
    QWEN3_8B,
    QWEN36_8B,
    QWEN36_27B,
    TARGET_SHA_1,
    TARGET_SHA_2,
    Seeded,
    assert_clean,
    chart_data,
    chart_specs,
    config_bytes,
    frame_with,
    point_dashboard_at,
    run_page,
)

# ==== the query layer, on SQLite and PostgreSQL (the `seeded` and `database_url` fixtures run on both) ====

# What the seeded runs say of their conditions (registry.domain.conditions): greedy, γ 16, stored before the rest
# was recorded, so the rest is unknown, a series of its own.
SEEDED_CONDITIONS = ("T=0 · dtype ? · γ=16 · new tokens ? · prompts ? · exactness unchecked · model unknown · "
                     "metrics v1")


@pytest.fixture
def db(seeded: Seeded) -> Iterator[ReadOnlyQueries]:
    opened = ReadOnlyQueries(seeded.url)
    yield opened
    opened.close()


def test_counts_equal_what_the_store_holds(seeded: Seeded, db: ReadOnlyQueries) -> None:
    store = seeded.store
    today = datetime.now(UTC).date()
    counts = queries.counts(db)
    assert counts.targets == len(store.reads.checkpoints()) == 5
    assert counts.drafters == len(store.reads.drafters()) == 5
    assert counts.exact_pairs == sum(1 for v in store.reads.verdicts() if v.verdict == "exact") == 4
    assert counts.open_lags == sum(1 for row in reports.lag_table(store, today) if row.open) == 1
    assert counts.runs == len(store.runs.list_runs()) == 8
    assert counts.failed_runs == len(store.runs.list_runs(status="failed")) == 1
    assert counts.events == len(store.events.events()) == 4



def _page_counting_targets(urls: list[str]) -> None:
    import streamlit as st

    from dashboard import queries
    from registry.store.read_queries import ReadOnlyQueries

    for url in urls:  # a fresh read object each run: the cache keys it by its database, not by the object
        st.metric(url, queries.counts(ReadOnlyQueries(url)).targets)


def test_a_table_is_kept_within_page_runs_per_database_and_read_afresh_outside(seeded: Seeded, db: ReadOnlyQueries,
                                                                              tmp_path: Path) -> None:
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    other = Store.open(other_url)
    other.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id="acme/Other-1B", source="hub", kind="base"))
    st.cache_data.clear()
    app = AppTest.from_function(_page_counting_targets, args=([seeded.url, other_url],), default_timeout=60).run()
    assert [m.value for m in app.metric] == ["5", "1"]  # two databases never share an entry

    seeded.store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id="acme/New-1B", source="hub", kind="base"))
    assert queries.counts(db).targets == 6  # outside a page, every call reads the database
    assert [m.value for m in app.run().metric] == ["5", "1"]  # within the pages' runs, kept (for TTL_S)
    st.cache_data.clear()
    assert [m.value for m in app.run().metric] == ["6", "1"]
    other.engine.dispose()

def test_availability_cells_are_the_best_head_verdict(seeded: Seeded, db: ReadOnlyQueries) -> None:
    cells = queries.availability(db)
    assert len(cells) == 5 * len(queries.METHOD_LABELS)
    best: dict[tuple[str, str], str] = {}
    for verdict in seeded.store.reads.verdicts():
        key = (verdict.checkpoint_repo_id, verdict.method)
        if key not in best or reports.VERDICT_ORDER[verdict.verdict] < reports.VERDICT_ORDER[best[key]]:
            best[key] = verdict.verdict
    shown = {(row.checkpoint, row.method): row.verdict for row in cells.itertuples()}
    for key, verdict in shown.items():
        assert verdict == best.get(key, queries.NO_VERDICT), key
    cell = cells[(cells["checkpoint"] == QWEN3_8B) & (cells["method"] == "eagle3")].iloc[0]
    assert (cell.verdict, cell.drafter) == ("exact", EAGLE_8B)
    assert cell.lag_days == (date(2025, 6, 1) - date(2025, 4, 29)).days
    # On Llama the best EAGLE-3 is exact while the Qwen DFlash drafter is only incompatible.
    llama = cells[cells["checkpoint"] == LLAMA].set_index("method")
    assert (llama.loc["eagle3", "verdict"], llama.loc["eagle3", "drafter"]) == ("exact", EAGLE_LLAMA)
    assert llama.loc["dflash", "verdict"] == "incompatible"
    assert cells[cells["checkpoint"] == QWEN36_27B]["verdict"].eq(queries.NO_VERDICT).all()

    matrix = queries.availability_matrix(cells)
    row = matrix.set_index("checkpoint").loc[QWEN3_8B]
    assert row["DFlash"] == f"exact · {DFLASH_8B} · {(date(2026, 1, 5) - date(2025, 4, 29)).days} d"
    assert row["DSpark"] == queries.NO_VERDICT


def test_availability_filters(seeded: Seeded, db: ReadOnlyQueries) -> None:
    assert set(queries.availability(db, orgs=["meta-llama"])["checkpoint"]) == {LLAMA}
    assert set(queries.availability(db, families=["Qwen3"])["checkpoint"]) == {QWEN3_8B, QWEN3_4B}
    assert set(queries.availability(db, sizes=["8B"], orgs=["Qwen"])["checkpoint"]) == {QWEN3_8B, QWEN36_8B}
    assert queries.availability(db, orgs=["nobody"]).empty
    options = queries.checkpoint_options(db)
    assert options.orgs == ("Qwen", "meta-llama")
    assert "27B" in options.sizes


def test_drafters_for_lists_every_verdict_best_first_and_follows_renames(seeded: Seeded, db: ReadOnlyQueries) -> None:
    fits = queries.drafters_for(db, QWEN3_8B)
    stored = {v.drafter_repo_id: v for v in seeded.store.reads.verdicts(checkpoint_repo_id=QWEN3_8B)}
    assert set(fits["drafter"]) == set(stored)
    for row in fits.itertuples():
        assert row.verdict == stored[row.drafter].verdict
        assert row.reasons == "; ".join(stored[row.drafter].reasons)
    ranks = [reports.VERDICT_ORDER[v] for v in fits["verdict"]]
    assert ranks == sorted(ranks)
    assert db.catalog.search_checkpoints("qwen3-8") == [QWEN3_8B]
    assert db.catalog.resolve_checkpoint("nobody/None") is None

    # Ranked (registry.calibration.ranking, as `find` and the API): the exact rows in that order, with why.
    ranked = queries.drafters_for(db, QWEN3_8B, {d: (n, f"why {n}") for n, d in enumerate(
        sorted(d for d, v in stored.items() if v.verdict == "exact"), start=1)})
    exact = ranked[ranked["verdict"] == "exact"]
    assert list(exact["rank"]) == list(range(1, len(exact) + 1)) and list(exact["why"]) == [
        f"why {n}" for n in range(1, len(exact) + 1)]
    assert [reports.VERDICT_ORDER[v] for v in ranked["verdict"]] == sorted(ranks)

    seeded.store.checkpoints.rename_checkpoint(QWEN3_4B, "Qwen/Qwen3-4B-Renamed")
    assert db.catalog.resolve_checkpoint(QWEN3_4B) == "Qwen/Qwen3-4B-Renamed"
    assert list(queries.drafters_for(db, QWEN3_4B)["verdict"]) == ["exact"]


def test_an_undated_catalog_drafter_has_no_release_day_as_in_the_reports(seeded: Seeded, db: ReadOnlyQueries) -> None:
    """The dashboard dated a catalog drafter without a published date by the day the catalog was loaded (its
    first_seen), inventing a lag the reports (`drafters find`, the API) do not show; one rule now."""
    undated = "someone/Qwen3-8B-DSpark"
    seeded.store.drafters.upsert_drafter(DrafterSpec(repo_id=undated, method="dspark", publisher="someone", source="catalog",
                                            targets=((QWEN3_8B, "catalog"),)))
    seeded.store.drafters.add_drafter_revision(undated, RevisionSpec(
        sha="e" * 40, config_raw=config_bytes("deepseek-ai__dspark_qwen3_4b_block7.json")))
    seeded.store.verdicts.recompute_compatibility(drafter_repo_id=undated)
    _, found = reports.find_for_checkpoint(seeded.store, QWEN3_8B)
    assert {r.drafter_repo_id: r.drafter_released for r in found}[undated] is None

    fits = queries.drafters_for(db, QWEN3_8B).set_index("drafter")
    assert pd.isna(fits.loc[undated, "drafter_released"]) and pd.isna(fits.loc[undated, "lag_days"])
    assert fits.loc[DFLASH_8B, "drafter_released"] == date(2026, 1, 5)  # a dated one keeps its day
    cells = queries.availability(db)
    cell = cells[(cells["checkpoint"] == QWEN3_8B) & (cells["method"] == "dspark")].iloc[0]
    assert cell.drafter == undated
    assert pd.isna(cell.drafter_released) and pd.isna(cell.lag_days)


def test_benchmark_summary_is_the_mean_and_spread_of_the_runs(seeded: Seeded, db: ReadOnlyQueries) -> None:
    summary = queries.benchmark_summary(db, target=QWEN3_8B, drafter=DFLASH_8B)
    assert len(summary) == len(seeded.speedups) == 4
    for row in summary.itertuples():
        expected = seeded.speedups[(row.hardware, row.prompt_set)]
        assert row.runs == len(expected)
        assert row.speedup_mean == pytest.approx(mean(expected))
        assert row.speedup_std == pytest.approx(pstdev(expected), abs=1e-6)
        assert (row.speedup_min, row.speedup_max) == (pytest.approx(min(expected)), pytest.approx(max(expected)))
    everything = queries.benchmark_summary(db)
    assert set(zip(everything["target"], everything["drafter"])) == {(QWEN3_8B, DFLASH_8B), (LLAMA, EAGLE_LLAMA)}
    pairs = queries.benchmark_pairs(db).set_index(["target", "drafter"])
    assert pairs.loc[(QWEN3_8B, DFLASH_8B), "runs"] == 7
    assert pairs.loc[(QWEN3_8B, DFLASH_8B), "ok_runs"] == 6


def test_history_keeps_series_apart_and_marks_the_revision_change(seeded: Seeded, db: ReadOnlyQueries) -> None:
    history = queries.benchmark_history(db, QWEN3_8B, DFLASH_8B)
    assert len(history) == 6 * 2
    by_series: dict[str, list[float]] = defaultdict(list)
    for row in history.itertuples():
        assert row.series == f"{row.hardware} · {row.engine} · {row.prompt_set} · {SEEDED_CONDITIONS}"
        by_series[row.series].append(row.speedup)
    for (hardware, prompt_set), speedups in seeded.speedups.items():
        assert by_series[f"{hardware} · pytorch · {prompt_set} · {SEEDED_CONDITIONS}"] == pytest.approx(speedups)

    changes = queries.revision_changes(history)
    # One change per H200 series, at the fourth run, and none on the RTX 3090 whose revision never changed.
    assert sorted(changes["series"]) == [f"H200 · pytorch · gsm8k · {SEEDED_CONDITIONS}", f"H200 · pytorch · mt-bench · {SEEDED_CONDITIONS}"]
    assert set(changes["run_id"]) == {seeded.run_ids[3]}
    assert set(changes["side"]) == {"target"}
    assert set(changes["change"]) == {f"target revision {TARGET_SHA_1[:10]} → {TARGET_SHA_2[:10]}"}


def test_runs_under_another_metric_definition_are_another_series(seeded: Seeded, store: Store,
                                                                   db: ReadOnlyQueries) -> None:
    store.runs.record_run(Run(target=QWEN3_8B, drafter=DFLASH_8B, method="dflash", hardware="H200", engine="pytorch",
                              overall=measured(speedup=9.0, tau=9.0), metric_version=2,
                              per_set=(measured("gsm8k", "d", speedup=9.0, tau=9.0),)))
    history = queries.benchmark_history(db, QWEN3_8B, DFLASH_8B)
    newest = history[history["speedup"] == 9.0]
    assert list(newest["series"]) == [f"H200 · pytorch · gsm8k · {SEEDED_CONDITIONS.replace('γ=16', 'γ ?')}"
                                      .replace("metrics v1", "metrics v2")]
    assert 9.0 not in list(history[history["series"] == f"H200 · pytorch · gsm8k · {SEEDED_CONDITIONS}"]["speedup"])
    summary = queries.benchmark_summary(db, target=QWEN3_8B, drafter=DFLASH_8B)
    h200 = summary[(summary["hardware"] == "H200") & (summary["prompt_set"] == "gsm8k")]
    assert sorted(zip(h200["metric_version"], h200["runs"])) == [(1, len(seeded.speedups[("H200", "gsm8k")])), (2, 1)]


def test_acceptance_by_position_is_the_stored_rates(seeded: Seeded, db: ReadOnlyQueries) -> None:
    run_id = seeded.run_ids[3]
    frame = queries.acceptance_by_position(db, run_id)
    stored = {
        result.name: result.per_position_acceptance
        for run in seeded.store.runs.list_runs(target=QWEN3_8B, drafter=DFLASH_8B)
        if run.run_id == run_id
        for result in run.per_set
    }
    assert stored == seeded.per_position
    for prompt_set, rates in stored.items():
        shown = frame[frame["prompt_set"] == prompt_set]
        assert list(shown["position"]) == list(range(1, len(rates) + 1))
        assert list(shown["acceptance"]) == pytest.approx(list(rates))
    assert queries.acceptance_by_position(db, seeded.failed_run_id).empty


def test_runs_keep_failed_ones_with_their_reason(seeded: Seeded, db: ReadOnlyQueries) -> None:
    failed = queries.runs(db, target=QWEN3_8B, drafter=DFLASH_8B, status="failed")
    assert list(failed["run_id"]) == [seeded.failed_run_id]
    assert failed["failure_reason"].iloc[0] == "CUDA out of memory while loading the drafter"
    every = queries.runs(db, target=QWEN3_8B, drafter=DFLASH_8B)
    assert len(every) == 7
    assert list(every["created_at"]) == sorted(every["created_at"], reverse=True)


def test_events_filters_and_messages(seeded: Seeded, db: ReadOnlyQueries) -> None:
    every = queries.events(db)
    stored = seeded.store.events.events()
    assert list(every["id"]) == [e.id for e in reversed(stored)]
    assert list(every["message"]) == [e.payload["message"] for e in reversed(stored)]
    assert set(queries.events(db, types=["new_drafter"])["subject"]) == {DFLASH_8B, EAGLE_LLAMA}
    assert set(queries.events(db, orgs=["meta-llama"])["subject"]) == {EAGLE_LLAMA}
    assert set(queries.events(db, families=["Qwen3.6"])["subject"]) == {QWEN36_27B}
    assert queries.events(db, since=date(2100, 1, 1)).empty
    assert len(queries.events(db, since=date(2000, 1, 1))) == 4
    options = queries.event_options(db)
    assert options.types == ("lag_opened", "new_drafter", "revision_changed")


def test_pair_queries(seeded: Seeded, db: ReadOnlyQueries) -> None:
    verdict = queries.pair_verdict(db, QWEN3_8B, DFLASH_8B)
    [stored] = seeded.store.reads.verdicts(checkpoint_repo_id=QWEN3_8B, drafter_repo_id=DFLASH_8B)
    assert verdict is not None
    assert (verdict.verdict, verdict.reasons, verdict.checks) == (stored.verdict, stored.reasons, stored.checks)
    assert verdict.checkpoint_sha == TARGET_SHA_1
    assert queries.pair_verdict(db, QWEN36_27B, DFLASH_8B) is None
    choices = queries.pair_choices(db)
    assert len(choices) == len(seeded.store.reads.verdicts())  # every run pair also has a verdict here
    assert not choices.duplicated(["target", "drafter"]).any()
    revisions = queries.checkpoint_revisions(db, QWEN3_8B)
    assert list(revisions["sha"]) == [TARGET_SHA_1] and bool(revisions["head"].iloc[0])
    assert list(queries.drafter_revisions(db, DFLASH_8B)["sha"]) == ["d" * 40]


def test_lag_report_is_the_reports_lag_table(seeded: Seeded, db: ReadOnlyQueries) -> None:
    today = datetime.now(UTC).date()
    report = queries.lag_report(db, today)
    rows = reports.lag_table(seeded.store, today)
    assert list(report.targets["target_repo_id"]) == [r.target_repo_id for r in rows]
    waiting = report.targets[report.targets["open"]]
    assert list(waiting["target_repo_id"]) == [QWEN36_27B]
    assert waiting["lag_days"].iloc[0] == (today - date(2026, 4, 22)).days
    qwen = report.targets.set_index("target_repo_id").loc[QWEN3_8B]
    assert qwen["first_drafter_repo_id"] == EAGLE_8B and qwen["publisher"] == "RedHatAI"
    points = report.timeline[report.timeline["target"] == QWEN3_8B]
    assert sorted(points["repo"]) == sorted([QWEN3_8B, DFLASH_8B, EAGLE_8B])
    assert set(report.by_family["family"]) == {"Qwen3", "Qwen3.6", "Llama-3.1"}
    upgrades = queries.upgrades(db, today)
    # A newer generation upgrades its line at any size (registry/domain/upgrades.py): both Qwen3.6 releases wait.
    assert list(upgrades["successor_repo_id"]) == [QWEN36_27B, QWEN36_8B]
    assert upgrades["open"].all()
    assert upgrades.set_index("successor_repo_id").loc[QWEN36_8B, "lag_days"] == (today - date(2026, 5, 1)).days


def test_the_engine_refuses_writes(seeded: Seeded) -> None:
    engine = open_read_only(seeded.url)
    try:
        with pytest.raises(SQLAlchemyError):
            with engine.begin() as connection:
                connection.execute(text("DELETE FROM event"))
    finally:
        engine.dispose()
    assert len(seeded.store.events.events()) == 4


def test_a_missing_sqlite_database_is_reported_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "registry.db"
    with pytest.raises(queries.DatabaseMissing, match="drafters catalog load"):
        ReadOnlyQueries(f"sqlite:///{path}")
    assert not path.parent.exists()


def test_schema_problems_say_which_command_fixes_them(tmp_path: Path) -> None:
    path = tmp_path / "bare.db"
    sqlite3.connect(path).close()
    bare = ReadOnlyQueries(f"sqlite:///{path}")
    assert "drafters catalog load" in (bare.schema_problem() or "")
    bare.close()

    url = f"sqlite:///{tmp_path / 'old.db'}"
    Store.open(url).engine.dispose()
    writer = create_engine(url)
    with writer.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    writer.dispose()
    old = ReadOnlyQueries(url)
    problem = old.schema_problem() or ""
    assert "drafters db upgrade" in problem and head_revision() in problem
    old.close()


def test_an_empty_database_gives_empty_frames(database_url: str) -> None:
    Store.open(database_url).engine.dispose()
    db = ReadOnlyQueries(database_url)
    try:
        assert db.schema_problem() is None
        assert queries.counts(db) == queries.Counts(0, 0, 0, 0, 0, 0, 0, 0)
        assert queries.availability(db).empty
        assert queries.availability_matrix(queries.availability(db)).empty
        assert queries.events(db).empty
        assert queries.benchmark_pairs(db).empty
        assert queries.benchmark_summary(db).empty
        assert queries.revision_changes(queries.benchmark_history(db, QWEN3_8B, DFLASH_8B)).empty
        assert queries.pair_choices(db).empty
        assert queries.lag_report(db, date(2026, 1, 1)).targets.empty
        assert queries.upgrades(db, date(2026, 1, 1)).empty
    finally:
        db.close()


# ==== the pages, run by AppTest on a seeded SQLite database (plus one PostgreSQL smoke test) ==============


def metrics(app: AppTest) -> dict[str, str]:
    return {metric.label: metric.value for metric in app.metric}


def test_overview_shows_the_counts_and_latest_events(dashboard_db: Seeded) -> None:
    app = run_page("overview")
    assert_clean(app)
    store = dashboard_db.store
    reader = ReadOnlyQueries(dashboard_db.url)
    counts = queries.counts(reader)
    reader.close()
    assert metrics(app) == {
        "Targets tracked": str(len(store.reads.checkpoints())),
        "Drafters": str(len(store.reads.drafters())),
        "Exact pairs": str(counts.exact_pairs),
        "Open lags": "1",
        "Benchmark runs": str(len(store.runs.list_runs())),
        "DFlash v1 drafters": str(sum(1 for d in store.reads.drafters() if d.in_21)),
    }
    speedups = frame_with(app, "speedup")
    newest_ok = next(r for r in store.runs.list_runs() if r.status == "ok")
    assert newest_ok.speedup in list(speedups["speedup"])
    events = frame_with(app, "message")
    assert list(events["message"]) == [e.payload["message"] for e in reversed(store.events.events())]


def test_overview_shows_the_services_parts_its_queue_and_each_checked_server(dashboard_db: Seeded) -> None:
    app = run_page("overview")
    assert_clean(app)
    assert any("No `drafters up` has recorded its state" in i.value for i in app.info)
    state = dashboard_db.store.watch_state
    state.set_service_status("box", "watcher", "waiting", detail="polled 15 orgs", success=True)
    state.set_service_status("box", "canary 1", "healthy", detail="http://127.0.0.1:8080: llama.cpp b1, τ 3.10",
                             success=True)
    state.set_service_status("box", "canary 2", "problem", detail="http://gpu:8000: vllm 0.21.1, τ unknown",
                             error="the server verified no drafted tokens for any probe prompt")
    st.cache_data.clear()
    app = run_page("overview")
    assert_clean(app)
    parts = frame_with(app, "part")
    assert list(parts["part"]) == ["canary 1", "canary 2", "watcher"]
    assert list(parts["state"]) == ["healthy", "problem", "waiting"]
    assert any("1 of 2 checked server(s) need attention" in w.value for w in app.warning)


def test_availability_matrix_filters_and_search(dashboard_db: Seeded) -> None:
    app = run_page("availability")
    assert_clean(app)
    matrix = frame_with(app, "DFlash").set_index("checkpoint")
    assert list(matrix.index) == sorted(c.repo_id for c in dashboard_db.store.reads.checkpoints())
    assert matrix.loc[QWEN3_8B, "EAGLE-3"] == f"exact · {EAGLE_8B} · {(date(2025, 6, 1) - date(2025, 4, 29)).days} d"
    assert matrix.loc[LLAMA, "DFlash"].startswith(f"incompatible · {DFLASH_8B}")
    assert matrix.loc[QWEN36_27B, "DFlash"] == queries.NO_VERDICT
    [tally] = chart_data(app)
    counted = tally[0].set_index(["method", "verdict"])["checkpoints"]
    assert counted[("EAGLE-3", "exact")] == 2 and counted[("DFlash", "exact")] == 2
    assert counted.sum() == 5 * len(queries.METHOD_LABELS)

    app.multiselect(key="orgs").set_value(["meta-llama"]).run()
    assert_clean(app)
    assert list(frame_with(app, "DFlash")["checkpoint"]) == [LLAMA]

    app.text_input(key="search").input("qwen3-8").run()
    assert_clean(app)
    found = frame_with(app, "reasons")
    stored = {v.drafter_repo_id: v.verdict for v in dashboard_db.store.reads.verdicts(checkpoint_repo_id=QWEN3_8B)}
    assert dict(zip(found["drafter"], found["verdict"])) == stored
    # The exact rows ranked as `find` and the API rank them (nothing measured on an H100 here: by rule), with why.
    exact = found[found["verdict"] == "exact"]
    assert [int(r) for r in exact["rank"]] == list(range(1, len(exact) + 1)) and len(exact) > 0
    assert all(why.startswith(("nothing measured", "published", "measured")) for why in exact["why"])

    app.text_input(key="search").input("nobody/Nothing-1B").run()
    assert_clean(app)
    assert any("not in the registry" in w.value for w in app.warning)


def test_lag_page_shows_open_lags_timeline_and_upgrades(dashboard_db: Seeded) -> None:
    app = run_page("lag")
    assert_clean(app)
    today = datetime.now(UTC).date()
    rows = reports.lag_table(dashboard_db.store, today)
    assert metrics(app)["Open lags"] == str(sum(r.open for r in rows)) == "1"
    waiting = frame_with(app, "released")
    assert list(waiting["target_repo_id"]) == [QWEN36_27B]
    assert waiting["lag_days"].iloc[0] == (today - date(2026, 4, 22)).days
    every = frame_with(app, "first_drafter_repo_id")
    assert list(every["target_repo_id"]) == [r.target_repo_id for r in rows]
    upgrades = frame_with(app, "successor_repo_id")
    assert list(upgrades["successor_repo_id"]) == [QWEN36_27B, QWEN36_8B]

    timeline = chart_data(app)[0]
    spans = next(frame for frame in timeline if "state" in frame.columns).set_index("target")
    assert spans.loc[QWEN36_27B, "state"] == "open (still growing)"
    assert pd.Timestamp(spans.loc[QWEN36_27B, "end"]).date() == today
    assert pd.Timestamp(spans.loc[QWEN3_8B, "end"]).date() == date(2025, 6, 1)
    points = next(frame for frame in timeline if "event" in frame.columns)
    assert set(points[points["target"] == LLAMA]["repo"]) == {LLAMA, EAGLE_LLAMA}


def test_a_slowdown_on_the_overview_is_said_and_explained_on_a_cpu(dashboard_db: Seeded) -> None:
    dashboard_db.store.runs.record_run(Run(
        target="/models/tiny-qwen3-target", drafter="/models/tiny-dflash", method="dflash", hardware="cpu (x86_64)",
        engine="pytorch", overall=measured(tau=3.01, speedup=0.4066), created_at=datetime.now(UTC)))
    app = run_page("overview")
    assert_clean(app)
    [warning] = [w.value for w in app.warning]
    assert "1 of 4 pairs are slower with their drafter" in warning and "On a CPU with tiny models" in warning
    speedups = frame_with(app, "speedup")
    assert 0.4066 in list(speedups["speedup"])  # the number stays a number; the column shows it as "0.41×"
    # A slowdown on a GPU gets no CPU excuse.
    dashboard_db.store.runs.record_run(Run(
        target=LLAMA, drafter=EAGLE_LLAMA, method="eagle3", hardware="L4", engine="pytorch",
        overall=measured(tau=1.2, speedup=0.8), created_at=datetime.now(UTC)))
    st.cache_data.clear()
    [warning] = [w.value for w in run_page("overview").warning]
    assert "2 of 5 pairs are slower" in warning and "On a CPU" not in warning


def test_an_upgrade_that_got_its_drafter_leaves_the_waiting_table(dashboard_db: Seeded) -> None:
    store = dashboard_db.store
    store.checkpoints.add_checkpoint_revision(
        QWEN36_8B, RevisionSpec(sha=TARGET_SHA_1, config_raw=(CONFIGS / "Qwen__Qwen3-8B.json").read_bytes()))
    store.drafters.upsert_drafter(DrafterSpec(
        repo_id="z-lab/Qwen3.6-8B-DFlash", method="dflash", publisher="z-lab", source="hub",
        targets=((QWEN36_8B, "catalog"),), released=date(2026, 5, 20), released_precision="day"))
    store.drafters.add_drafter_revision("z-lab/Qwen3.6-8B-DFlash", RevisionSpec(
        sha=DRAFTER_SHA, config_raw=(CONFIGS / "z-lab__Qwen3-8B-DFlash-b16.json").read_bytes()))
    store.verdicts.recompute_compatibility()
    st.cache_data.clear()
    app = run_page("lag")
    assert_clean(app)
    waiting, closed = [e.value for e in app.dataframe if "successor_repo_id" in e.value.columns]
    assert list(waiting["successor_repo_id"]) == [QWEN36_27B]
    assert list(closed["successor_repo_id"]) == [QWEN36_8B] and closed["lag_days"].iloc[0] == 19
    assert "open" not in closed.columns  # waiting and closed are told apart by the table, not a column off-screen
    assert [h.value for h in app.subheader].count("Upgrades that got their drafter") == 1


def test_benchmarks_plot_speedup_against_concurrency_with_the_crossover(dashboard_db: Seeded) -> None:
    from registry.domain.curve import CurvePoint, SpeedupCurve, SweepConditions

    app = run_page("benchmarks")
    assert any("No concurrency sweep yet" in i.value for i in app.info)
    speedups = {1: 2.1, 4: 1.4, 8: 0.77, 16: 0.7}  # vllm-project/vllm#50851's shape: a slowdown from c8
    points = tuple(CurvePoint(concurrency=c, requests=16, output_tokens=2048, seconds=2.0, tokens_per_s=100 * s,
                              baseline_tokens_per_s=100.0, latency_per_token_s=0.02, baseline_latency_per_token_s=0.03,
                              tau=3.1, drafts=600) for c, s in speedups.items())
    conditions = SweepConditions(max_new_tokens=256, temperature=0.0, prompt_set="sweep-default",
                                 prompt_digest="sweep-default", requests_per_level=16, url="http://gpu:8000",
                                 baseline_url="http://gpu:8001")
    dashboard_db.store.curves.record_curve(SpeedupCurve(
        target=QWEN3_8B, drafter=DFLASH_8B, engine="vllm", engine_version="0.21.1", hardware="H100",
        conditions=conditions, points=points))
    st.cache_data.clear()
    app = run_page("benchmarks")
    assert_clean(app)
    [sweep] = [s for s in app.selectbox if s.label == "Sweep"]
    assert "pays up to c≈4 on H100 (vllm 0.21.1)" in sweep.format_func(sweep.value)
    table = frame_with(app, "latency_per_token_s")
    assert list(table["concurrency"]) == [1, 4, 8, 16]
    assert list(table["speedup"]) == pytest.approx(list(speedups.values()))
    assert list(table["crossover"]) == [False, False, True, False]
    assert any("first measured concurrency where it stops paying" in c.value for c in app.caption)
    assert any("One length measured for this pair (256 tokens)" in c.value for c in app.caption)
    assert any("One prompt set measured for this pair (sweep-default)" in c.value for c in app.caption)

    # The same pair at 1,024 tokens, then on math prompts at 256: the page draws the pair's speedup against length
    # (same prompts) and per kind of prompt (same length), never mixing another condition in.
    def record(max_new_tokens: int, prompt_set: str, scale: float, hardware: str = "H100") -> int:
        curve = SpeedupCurve(target=QWEN3_8B, drafter=DFLASH_8B, engine="vllm", engine_version="0.21.1",
                             hardware=hardware, conditions=replace(conditions, max_new_tokens=max_new_tokens,
                                                                 prompt_set=prompt_set, prompt_digest=prompt_set),
                             points=tuple(replace(p, tokens_per_s=p.tokens_per_s * scale) for p in points))
        return dashboard_db.store.curves.record_curve(curve).curve_id  # type: ignore[return-value]

    record(2048, "sweep-default", 3.0, hardware="A100")  # another machine: never on the H100's length curve
    longer = record(1024, "sweep-default", 0.5)
    record(256, "cat-math", 1.25)  # the newest: the page opens on it
    st.cache_data.clear()
    app = run_page("benchmarks")
    assert_clean(app)
    categories = _frame_of(app, ["prompt_set", "concurrency", "speedup", "tau"])
    assert sorted(set(categories["prompt_set"])) == ["cat-math", "sweep-default"]
    [sweep] = [s for s in app.selectbox if s.label == "Sweep"]
    app = sweep.set_value(longer).run()
    lengths = _frame_of(app, ["max_new_tokens", "concurrency", "speedup", "tau"])
    at_c1 = lengths[lengths["concurrency"] == 1]
    assert list(at_c1["max_new_tokens"]) == [256, 1024] and list(at_c1["speedup"]) == pytest.approx([2.1, 1.05])
    assert any("One prompt set measured for this pair (sweep-default)" in c.value for c in app.caption)


def _frame_of(app: AppTest, columns: list[str]) -> pd.DataFrame:
    [frame] = [e.value for e in app.dataframe if list(e.value.columns) == columns]
    return frame


def test_benchmarks_summary_history_and_acceptance(dashboard_db: Seeded) -> None:
    app = run_page("benchmarks")
    assert_clean(app)
    # The pair with the most runs comes first.
    summary = frame_with(app, "speedup_std")
    assert set(summary["drafter"]) == {DFLASH_8B}
    for row in summary.itertuples():
        expected = dashboard_db.speedups[(row.hardware, row.prompt_set)]
        assert row.runs == len(expected)
        assert row.speedup_mean == pytest.approx(mean(expected))

    charts = chart_data(app)
    assert len(charts) == 3
    history = next(frame for frame in charts[1] if "series" in frame.columns and "speedup" in frame.columns)
    assert len(history) == 12
    for (hardware, prompt_set), speedups in dashboard_db.speedups.items():
        series = history[history["series"] == f"{hardware} · pytorch · {prompt_set} · {SEEDED_CONDITIONS}"]
        assert list(series["speedup"]) == pytest.approx(speedups)
    rules = next(frame for frame in charts[1] if "change" in frame.columns)
    assert set(rules["run_id"]) == {dashboard_db.run_ids[3]}
    positions = charts[2][0]
    newest = dashboard_db.run_ids[-1]
    assert app.selectbox(key="run").value == newest
    stored = {
        result.name: list(result.per_position_acceptance)
        for run in dashboard_db.store.runs.list_runs()
        if run.run_id == newest
        for result in run.per_set
    }
    assert {p: list(g["acceptance"]) for p, g in positions.groupby("prompt_set")} == stored
    failed = frame_with(app, "failure_reason")
    assert list(failed["run_id"]) == [dashboard_db.failed_run_id]

    app.selectbox(key="run").set_value(dashboard_db.run_ids[3]).run()
    assert_clean(app)
    shown = {p: tuple(g["acceptance"]) for p, g in chart_data(app)[2][0].groupby("prompt_set")}
    assert shown == dashboard_db.per_position

    app.radio(key="metric").set_value("tau").run()
    assert_clean(app)
    spec = chart_specs(app)[1]
    assert spec["layer"][0]["encoding"]["y"]["field"] == "tau"

    app.selectbox(key="pair").set_value(1).run()
    assert_clean(app)
    other = frame_with(app, "speedup_std")
    assert list(zip(other["target"], other["drafter"], other["speedup_mean"])) == [(LLAMA, EAGLE_LLAMA, 2.2)]

    tables = len(app.dataframe)
    app.toggle(key="all_pairs").set_value(True).run()
    assert_clean(app)
    assert len(app.dataframe) == tables + 1
    every = app.dataframe[-1].value
    assert set(zip(every["target"], every["drafter"])) == {(QWEN3_8B, DFLASH_8B), (LLAMA, EAGLE_LLAMA)}
    assert every["runs"].sum() == sum(len(v) for v in dashboard_db.speedups.values()) + 1


def test_pair_page_shows_verdict_revisions_runs_and_memory(dashboard_db: Seeded) -> None:
    app = run_page("pair", query_params={"target": QWEN3_8B, "drafter": DFLASH_8B})
    assert_clean(app)
    assert (app.selectbox(key="target").value, app.selectbox(key="drafter").value) == (QWEN3_8B, DFLASH_8B)
    [stored] = dashboard_db.store.reads.verdicts(checkpoint_repo_id=QWEN3_8B, drafter_repo_id=DFLASH_8B)
    markdown = " ".join(m.value for m in app.markdown)
    assert f"**{stored.verdict}**" in markdown
    for reason in stored.reasons:
        assert data.md(reason) in markdown  # shown literally: Markdown characters escaped
    runs = frame_with(app, "failure_reason")
    assert set(runs["run_id"]) == {*dashboard_db.run_ids, dashboard_db.failed_run_id}

    # One memory model with `drafters price`: the same side facts, pair shape and fit, in GiB.
    target_side = calibration.side_facts(dashboard_db.store, QWEN3_8B, drafter=False)
    drafter_side = calibration.side_facts(dashboard_db.store, DFLASH_8B, drafter=True)
    shape = pricing.pair_shape(target_side.config, drafter_side.config, drafter_side.method,
                               target_parameters=target_side.parameters, drafter_parameters=drafter_side.parameters)
    assert shape.drafter.parameters == 1_000_000_000  # 2 GB of bf16 weights in the registry
    budget = frame_with(app, "12 GiB").set_index("quantization")
    for quant in pricing.QUANTIZATIONS:
        for gib in memory.CARD_SIZES_GB:
            fit = pricing.fit(shape, quant=quant, context=memory.DEFAULT_CONTEXT_TOKENS,
                              device=pricing.memory_card(gib))
            assert budget.loc[quant.name, f"{gib} GiB"].startswith("fits") == fit.fits, (quant, gib)
    assert budget.loc["bf16", "16 GiB"].startswith("short") and budget.loc["Q4_K_M", "12 GiB"].startswith("fits")
    parts = chart_data(app)[0]
    stacked = next(frame for frame in parts if "part" in frame.columns).set_index(["quantization", "part"])["GiB"]
    assert stacked[("bf16", "target")] == pytest.approx(round(8_190_735_360 * 2 / memory.GIB, 2))
    captions = " ".join(c.value for c in app.caption)
    assert "drafter ≈ 1.00 B parameters" in captions and "drafter weights unknown" not in captions
    assert app.selectbox(key="price_quant").value == pricing.DEFAULT_QUANTIZATION.name == "Q4_K_M"

    app.number_input(key="context").set_value(131072).run()
    assert_clean(app)
    assert frame_with(app, "12 GiB").set_index("quantization").loc["Q4_K_M", "12 GiB"].startswith("short")

    app.selectbox(key="target").set_value(LLAMA).run()
    assert_clean(app)
    assert set(app.selectbox(key="drafter").options) == {
        v.drafter_repo_id for v in dashboard_db.store.reads.verdicts(checkpoint_repo_id=LLAMA)
    }


def test_pages_mark_repos_gone_from_the_hub_and_follow_a_renamed_drafters_runs(dashboard_db: Seeded) -> None:
    store = dashboard_db.store
    why = "no longer public on the Hub (deleted or made private)"
    store.drafters.set_drafter_status(EAGLE_8B, "gone", hub_presence.gone_detail(why, date(2026, 5, 2)))
    store.checkpoints.set_checkpoint_status(LLAMA, "gone", hub_presence.gone_detail(why, date(2026, 5, 3)))
    drafter_gone, target_gone = "gone from the Hub since 2026-05-02", "gone from the Hub since 2026-05-03"

    app = run_page("availability")
    assert_clean(app)
    matrix = frame_with(app, "DFlash").set_index("checkpoint")
    lag = (date(2025, 6, 1) - date(2025, 4, 29)).days
    assert matrix.loc[QWEN3_8B, "EAGLE-3"] == f"exact · {EAGLE_8B} ({drafter_gone}) · {lag} d"
    assert (matrix.loc[LLAMA, "hub"], matrix.loc[QWEN3_8B, "hub"]) == (target_gone, data.EMPTY)
    app.text_input(key="search").input("qwen3-8").run()
    assert_clean(app)
    found = frame_with(app, "reasons").set_index("drafter")
    assert (found.loc[EAGLE_8B, "hub"], found.loc[DFLASH_8B, "hub"]) == (drafter_gone, data.EMPTY)

    app = run_page("pair", query_params={"target": QWEN3_8B, "drafter": EAGLE_8B})
    assert_clean(app)  # a size the registry does not know is said in an info box, not an error
    assert [w.value for w in app.warning] == [data.md(
        f"the drafter {EAGLE_8B} is {drafter_gone}: its history is kept, but it cannot be downloaded now")]
    app = run_page("pair", query_params={"target": LLAMA, "drafter": EAGLE_LLAMA})
    assert_clean(app)
    assert [w.value for w in app.warning] == [data.md(
        f"the target {LLAMA} is {target_gone}: its history is kept, but it cannot be downloaded now")]

    # The watcher follows a rename on the Hub (Store.rename_drafter): the runs go with the drafter.
    renamed = "z-lab/Qwen3-8B-DFlash-b16-v2"
    store.drafters.rename_drafter(DFLASH_8B, renamed)
    st.cache_data.clear()  # as the pages' TTL would, a minute later
    app = run_page("pair", query_params={"target": QWEN3_8B, "drafter": renamed})
    assert_clean(app)
    assert app.selectbox(key="drafter").value == renamed and DFLASH_8B not in app.selectbox(key="drafter").options
    assert not list(app.warning)
    runs = frame_with(app, "failure_reason")
    assert set(runs["run_id"]) == {*dashboard_db.run_ids, dashboard_db.failed_run_id}


def test_alerts_filter_events_and_link_the_feed(dashboard_db: Seeded, isolated_env: Path) -> None:
    app = run_page("alerts")
    assert_clean(app)
    assert len(frame_with(app, "message")) == 4
    assert any("drafters feed" in i.value for i in app.info)

    app.multiselect(key="alert_types").set_value(["new_drafter"]).run()
    assert_clean(app)
    assert set(frame_with(app, "message")["subject"]) == {DFLASH_8B, EAGLE_LLAMA}
    app.multiselect(key="alert_orgs").set_value(["meta-llama"]).run()
    assert list(frame_with(app, "message")["subject"]) == [EAGLE_LLAMA]
    app.date_input(key="alert_since").set_value(datetime.now(UTC).date() + timedelta(days=1)).run()
    assert_clean(app)
    assert any("No event matches" in i.value for i in app.info)

    feed = isolated_env / "feed.atom"
    feed.parent.mkdir(parents=True, exist_ok=True)
    feed.write_bytes(b"<?xml version='1.0'?><feed xmlns='http://www.w3.org/2005/Atom'/>")
    app = run_page("alerts")
    assert_clean(app)
    assert any(str(feed) in m.value for m in app.markdown)
    assert len(app.get("download_button")) == 1


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_every_page_on_an_empty_database_says_what_fills_it(
    page: str, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    Store.open(sqlite_url).engine.dispose()
    point_dashboard_at(sqlite_url, monkeypatch)
    app = run_page(page)
    assert_clean(app)
    hints = " ".join(i.value for i in app.info)
    assert "drafters" in hints, hints


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_every_page_without_a_database_says_how_to_create_it(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "none" / "registry.db"
    point_dashboard_at(f"sqlite:///{path}", monkeypatch)
    app = run_page(page)
    assert_clean(app)
    assert any("drafters catalog load" in i.value for i in app.info)
    assert not path.parent.exists()  # the dashboard created nothing


def test_the_app_navigates_between_pages(dashboard_db: Seeded) -> None:
    app = AppTest.from_file(str(REPO_ROOT / "dashboard" / "app.py"), default_timeout=60).run()
    assert_clean(app)
    assert app.title[0].value == "Drafter Registry"
    app.switch_page("views/lag.py").run()
    assert_clean(app)
    assert app.title[0].value == "Lag"


def test_every_page_runs_on_both_backends(seeded: Seeded, monkeypatch: pytest.MonkeyPatch) -> None:
    """Smoke: every page runs on the seeded SQLite and PostgreSQL databases and shows their numbers."""
    point_dashboard_at(seeded.url, monkeypatch)
    for page in PAGE_NAMES:
        assert_clean(run_page(page))
    assert metrics(run_page("overview"))["Benchmark runs"] == "8"
    summary = frame_with(run_page("benchmarks"), "speedup_std")
    assert summary["runs"].sum() == sum(len(v) for v in seeded.speedups.values())



def test_pages_work_under_a_postgresql_role_that_may_only_select(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not seeded.url.startswith("postgresql"):
        pytest.skip("database roles are a PostgreSQL feature")
    role = f"reader_{uuid.uuid4().hex[:8]}"
    admin = create_engine(seeded.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD 'reader'"))
        connection.execute(text(f"GRANT USAGE ON SCHEMA public TO {role}"))
        connection.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"))
    reader_url = make_url(seeded.url).set(username=role, password="reader").render_as_string(hide_password=False)
    try:
        point_dashboard_at(reader_url, monkeypatch)
        for page in PAGE_NAMES:
            assert_clean(run_page(page))
        assert metrics(run_page("overview"))["Benchmark runs"] == "8"
        reader = create_engine(reader_url)
        with pytest.raises(SQLAlchemyError), reader.begin() as connection:
            connection.execute(text("DELETE FROM event"))  # the role really cannot write
        reader.dispose()
    finally:
        data.reader(reader_url).close()
        with admin.connect() as connection:
            connection.execute(text(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}"))
            connection.execute(text(f"REVOKE USAGE ON SCHEMA public FROM {role}"))
            connection.execute(text(f"DROP ROLE {role}"))
        admin.dispose()

# ==== launching ==================================================================================


def test_launch_command_runs_the_installed_app_on_loopback() -> None:
    url = "postgresql+psycopg://reader:s3cret@127.0.0.1:5432/registry"
    argv = launch.command(8765, url)
    app = Path(dashboard.__file__).resolve().parent / "app.py"
    assert argv[:5] == [sys.executable, "-m", "streamlit", "run", str(app)]
    assert app.is_file() and launch.app_path() == app
    flags = dict(zip(argv[5::2], argv[6::2]))
    assert flags == {
        "--server.headless": "true", "--server.port": "8765", "--server.address": "127.0.0.1",
        "--browser.gatherUsageStats": "false", "--client.toolbarMode": "viewer",  # no Deploy button
    }
    assert not any("s3cret" in part for part in argv)  # the URL travels in the environment


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_launch_refuses_a_bad_port(port: int) -> None:
    with pytest.raises(launch.LaunchError, match="port must be between 1 and 65535"):
        launch.command(port, None)


def test_launch_refuses_a_bad_url_without_echoing_it() -> None:
    with pytest.raises(launch.LaunchError, match="not a database URL") as raised:
        launch.command(8765, "not a url s3cret")
    assert "s3cret" not in str(raised.value)
