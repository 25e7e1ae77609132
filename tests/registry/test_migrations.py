"""The schema changes only through migrations, and the migrations match the models."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, func, inspect, select

from registry.domain.records import CheckpointSpec, DrafterSpec, RevisionSpec
from registry.store import Store, db
from registry.store.models import Base, BenchmarkRun, Compatibility, RunPredictionRow, RunSetResult
from tests.conftest import REPO_ROOT
from tests.fakehub.scenario import QWEN3_8B_CONFIG, QWEN3_8B_DFLASH_CONFIG


def _migration(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "migrations" / "versions" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPEATED_BEFORE_0007 = _migration("0007_run_measurement_json").REPEATED


def test_one_head() -> None:
    script = ScriptDirectory.from_config(db._alembic_config(db.make_engine("sqlite://")))
    assert len(script.get_heads()) == 1
    assert db.head_revision() == script.get_current_head()


def test_upgrade_to_head_then_down_to_empty(database_url: str) -> None:
    engine = db.make_engine(database_url)
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
    tables = set(inspect(engine).get_table_names())
    assert {"checkpoint", "checkpoint_revision", "drafter", "drafter_revision", "compatibility", "event"} <= tables
    db.downgrade(engine, "base")
    assert db.current_revision(engine) is None
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
    engine.dispose()


def test_models_match_migrations(database_url: str) -> None:
    """The equivalent of `alembic check`: autogenerate finds nothing to add after upgrading to head."""
    engine = db.make_engine(database_url)
    db.upgrade(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == []


def test_open_database_upgrades_a_new_file(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'dir' / 'r.db'}"
    engine = db.open_database(url)
    assert db.current_revision(engine) == db.head_revision()
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_bad_database_urls_are_one_line_errors(tmp_path) -> None:
    import pytest

    for url in ("not a url", "nosuchdialect://x/y", "postgresql+psycopg://nobody:pw@127.0.0.1:1/none"):
        with pytest.raises(db.DatabaseError) as info:
            db.open_database(url)
        assert "\n" not in str(info.value).strip()


# ---- 0007: a run's JSON is its measurement's parts only ---------------------------------------------------------

BEFORE_0007 = "0006_w12_drafter_alias"
CREATED = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _spread(median: float, low: float, high: float, n: int = 3) -> dict[str, Any]:
    return {"median": median, "minimum": low, "maximum": high, "q1": (low + median) / 2, "q3": (median + high) / 2,
            "n": n}


def _throughput(tokens_per_s: float, share: float) -> dict[str, Any]:
    return {"prompts": 2, "output_tokens": 128, "seconds": 128 / tokens_per_s, "tokens_per_s": tokens_per_s,
            "ttft_s": 0.05, "tpot_s": 1 / tokens_per_s, "target_steps": 40, "draft_seconds_per_step": 0.002,
            "verify_seconds_per_step": 0.02, "draft_time_share": share}


# 40 rounds of 4 drafts: 5/10/5/10/10 rounds accepted 0/1/2/3/4 of them, so τ = 1 + 90/40 = 1 + Σ m_i.
VERIFIER_ACCEPTANCE = {"rounds": 40, "drafted": 160, "accepted": 90, "tau": 3.25, "acceptance_rate": 0.5625,
                       "histogram": [5, 10, 5, 10, 10], "marginal": [0.875, 0.625, 0.5, 0.25],
                       "conditional": [0.875, 25 / 35, 0.8, 0.5], "uniform_draft_length": True, "identity_gap": 0.0}
SPEEDUP = _spread(1.8, 1.7, 1.95)
DECODE_SPEEDUP = _spread(1.9, 1.8, 2.0)


def _verifier_set(name: str, *, version: int) -> dict[str, Any]:
    """A SetMeasurement as the harness wrote it (asdict); version 1 had no decode speedup and no τ emitted."""
    measured = {"name": name, "prompts": 2, "digest": f"digest-{name}", "baseline": _throughput(50.0, 0.0),
                "baseline_tokens_per_s": _spread(50.0, 49.0, 52.0), "speculative": _throughput(90.0, 0.09),
                "tokens_per_s": _spread(90.0, 88.0, 91.5), "speedup": SPEEDUP, "acceptance": VERIFIER_ACCEPTANCE,
                "ideal_speedup": 2.4, "efficiency": 0.79, "lossless": True}
    if version >= 2:
        measured |= {"decode_speedup": DECODE_SPEEDUP, "tau_emitted": 3.5}
    return measured


def _legacy_verifier_metrics(*, version: int) -> dict[str, Any]:
    """A verifier run's `metrics` before 0007 (PairRun.to_dict without provenance and per_set, plus "marginal"):
    the headline numbers repeated beside the `overall` set they come from."""
    overall = _verifier_set("overall", version=version)
    acc = VERIFIER_ACCEPTANCE
    metrics: dict[str, Any] = {
        "method": "dflash", "lossless": True, "first_divergence": None, "tau": acc["tau"],
        "acceptance_rate": acc["acceptance_rate"],
        "per_position_acceptance": {"marginal": acc["marginal"], "conditional": acc["conditional"]},
        "acceptance_histogram": acc["histogram"],
        "identity_check": {"uniform_draft_length": True, "gap": 0.0},
        "baseline_tokens_per_s": 50.0, "tokens_per_s": 90.0, "speedup": 1.8, "ideal_speedup": 2.4, "efficiency": 0.79,
        "ttft_s": 0.05, "tpot_s": 1 / 90.0, "draft_time_share": 0.09, "peak_memory_bytes": 400_000_000,
        "peak_memory_kind": "process_rss_peak", "target_weight_bytes": 2_000_000, "drafter_weight_bytes": 400_000,
        "draft_length": 4, "repeats": 3, "overall": overall,
        "settings": {"max_new_tokens": 32, "temperature": 0.0, "seed": 0, "repeats": 3, "warmup": 1, "device": "cpu",
                     "dtype": "float32", "draft_length": None, "method": None, "enable_thinking": False},
        "marginal": acc["marginal"],
    }
    if version >= 2:
        metrics |= {
            "metric_version": version, "tau_emitted": 3.5, "speedup_spread": SPEEDUP, "decode_speedup": 1.9,
            "decode_speedup_spread": DECODE_SPEEDUP,
            "forward_costs": {"context_length": 16, "gamma": 4, "target_step_s": 0.01, "verify_step_s": 0.014,
                              "draft_step_s": 0.002, "repeats": 10,
                              "spread": {"target_step_s": {"min": 0.01, "q1": 0.01, "median": 0.011, "q3": 0.012,
                                                           "max": 0.013}}},
            "settings": {**metrics["settings"], "cost_repeats": 10},
            "prediction": {"run_id": "legacy-v2", "target": "Qwen/Qwen3-8B", "drafter": "z-lab/Qwen3-8B-DFlash-b16",
                           "engine": "pytorch", "hardware": "cpu (x86_64)", "predicted_baseline_tokens_per_s": 55.0,
                           "measured_baseline_tokens_per_s": 50.0, "baseline_error": 0.1,
                           "predicted_tokens_per_s": 99.0, "measured_tokens_per_s": 90.0, "tokens_per_s_error": 0.1,
                           "predicted_speedup": 1.8, "measured_speedup": 1.8, "speedup_error": 0.0,
                           "device_basis": "fitted", "note": "bf16 weights", "model_version": 2,
                           "fitted_from": ["r1", "r2"], "overhead_s": 0.001},
        }
    return metrics


# llama.cpp counters: 100 drafts of 3 tokens, 200 accepted (80/70/50 at positions 1-3): τ = 3, rate 2/3.
LLAMACPP_COUNTERS = {"spec": {"drafts": 100, "draft_tokens": 300, "accepted": 200,
                              "accepted_per_position": [80, 70, 50]},
                     "tokens_predicted": 4250, "tokens_predicted_seconds": 100.0}
LLAMACPP_METRICS = {"tau": 3.0, "acceptance_rate": 2 / 3, "marginal": [0.8, 0.7, 0.5],
                    "acceptance_histogram": [20, 10, 20, 50],
                    "per_position_acceptance": {"marginal": [0.8, 0.7, 0.5], "conditional": [0.8, 0.875, 5 / 7]},
                    "tokens_per_s": 42.5}
SGLANG_COUNTERS = {"avg_spec_accept_length": 3.4, "last_gen_throughput": 120.0}
SGLANG_METRICS = {"tau": 3.4, "acceptance_rate": None, "marginal": [], "acceptance_histogram": None,
                  "per_position_acceptance": None, "tokens_per_s": 120.0}


def _insert_legacy_runs(engine: Engine) -> None:
    """The rows the code before 0007 wrote: two verifier runs (metric versions 2 and none), a llama.cpp and an
    SGLang run read from the servers' counters (`drafters ingest`), and a failed run."""
    runs, sets = BenchmarkRun.__table__, RunSetResult.__table__
    verifier = {"status": "ok", "engine": "pytorch", "target": "Qwen/Qwen3-8B", "drafter": "z-lab/Qwen3-8B-DFlash-b16",
                "method": "dflash", "draft_length": 4, "temperature": 0.0, "seed": 0, "dtype": "float32",
                "hardware": "cpu (x86_64)", "lossless": True, "tau": 3.25, "acceptance_rate": 0.5625,
                "baseline_tokens_per_s": 50.0, "tokens_per_s": 90.0, "speedup": 1.8, "efficiency": 0.79,
                "peak_memory_bytes": 400_000_000, "target_weight_bytes": 2_000_000, "drafter_weight_bytes": 400_000,
                "created_at": CREATED}
    ingested = {"status": "ok", "target": "Qwen/Qwen3-8B", "drafter": None, "hardware": "RTX 3060 12GB",
                "device_name": "RTX 3060 12GB", "created_at": CREATED}
    with engine.begin() as connection:
        for pk, run_id, version in ((1, "legacy-v2", 2), (2, "legacy-v1", 1)):
            connection.execute(runs.insert().values(
                id=pk, run_id=run_id, **verifier, metrics=_legacy_verifier_metrics(version=version),
                provenance={"device": "cpu (x86_64)", "seed": 0}))
            connection.execute(sets.insert().values(
                run_pk=pk, prompt_set="code", prompt_set_digest="digest-code", tau=3.25, acceptance_rate=0.5625,
                per_position_acceptance=VERIFIER_ACCEPTANCE["marginal"], baseline_tokens_per_s=50.0,
                tokens_per_s=90.0, speedup=1.8, speedup_spread=0.25, lossless=True,
                metrics=_verifier_set("code", version=version)))
        for pk, run_id, server, engine_name, method, tau, rate, marginal, tokens_per_s, counters, metrics in (
            (3, "legacy-llamacpp", "llamacpp", "llama.cpp", "draft", 3.0, 2 / 3, [0.8, 0.7, 0.5], 42.5,
             LLAMACPP_COUNTERS, LLAMACPP_METRICS),
            (4, "legacy-sglang", "sglang", "sglang", "eagle3", 3.4, None, [], 120.0, SGLANG_COUNTERS, SGLANG_METRICS),
        ):
            connection.execute(runs.insert().values(
                id=pk, run_id=run_id, **ingested, engine=engine_name, method=method, tau=tau, acceptance_rate=rate,
                tokens_per_s=tokens_per_s, metrics=metrics,
                provenance={"source": "ingested", "url": "http://127.0.0.1:8080", "server": server,
                            "counters": counters}))
            connection.execute(sets.insert().values(
                run_pk=pk, prompt_set="live-traffic", prompt_set_digest="live-traffic", tau=tau, acceptance_rate=rate,
                per_position_acceptance=marginal, tokens_per_s=tokens_per_s, metrics={"counters": counters}))
        connection.execute(runs.insert().values(
            id=5, run_id="legacy-failed", status="failed", failure_reason="out of memory", target="Qwen/Qwen3-8B",
            drafter="z-lab/Qwen3-8B-DFlash-b16", created_at=CREATED, metrics={}, provenance={"request": {}}))
        # A successful run of which only the columns were kept (written by hand, JSON empty).
        connection.execute(runs.insert().values(
            id=6, run_id="legacy-bare", status="ok", engine="pytorch", target="Qwen/Qwen3-8B", drafter=None,
            tau=2.5, baseline_tokens_per_s=21.4, tokens_per_s=30.0, speedup=1.4, efficiency=0.6, lossless=True,
            created_at=CREATED, metrics={}, provenance={}))
        connection.execute(sets.insert().values(
            run_pk=6, prompt_set="chat", prompt_set_digest="digest-chat", tau=2.5, tokens_per_s=30.0, speedup=1.4,
            per_position_acceptance=[], metrics={}))


def _stored_json(engine: Engine) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """Each run's metrics JSON and its set rows' metrics JSON, by run id, as the database holds them."""
    runs, sets = BenchmarkRun.__table__, RunSetResult.__table__
    with engine.connect() as connection:
        metrics = {row.run_id: row.metrics for row in connection.execute(select(runs.c.run_id, runs.c.metrics))}
        set_metrics: dict[str, list[dict[str, Any]]] = {}
        for row in connection.execute(select(runs.c.run_id, sets.c.metrics).join(sets, sets.c.run_pk == runs.c.id)
                                      .order_by(sets.c.id)):
            set_metrics.setdefault(row.run_id, []).append(row.metrics)
    return metrics, set_metrics


def _stored_predictions(engine: Engine) -> dict[str, dict[str, Any]]:
    """Each run's run_prediction JSON, by run id."""
    runs, predictions = BenchmarkRun.__table__, RunPredictionRow.__table__
    with engine.connect() as connection:
        return {row.run_id: row.prediction for row in connection.execute(
            select(runs.c.run_id, predictions.c.prediction).join(predictions, predictions.c.run_pk == runs.c.id))}


def test_0011_moves_predictions_into_their_own_table_and_back(database_url: str) -> None:
    """A prediction stored in the run's metrics JSON (before 0011) moves to run_prediction unchanged and reads back
    as the run's prediction; a null one leaves no row; the downgrade puts it back where the old code reads it."""
    engine = db.make_engine(database_url)
    db.upgrade(engine, "0010_autoverify")
    prediction = _legacy_verifier_metrics(version=2)["prediction"]
    runs = BenchmarkRun.__table__
    common = {"status": "ok", "engine": "pytorch", "target": "Qwen/Qwen3-8B", "created_at": CREATED,
              "provenance": {}}
    with engine.begin() as connection:
        connection.execute(runs.insert().values(id=1, run_id="legacy-v2", **common,
                                                metrics={"metric_version": 2, "prediction": prediction}))
        connection.execute(runs.insert().values(id=2, run_id="unpredicted", **common,
                                                metrics={"metric_version": 2, "prediction": None}))
    db.upgrade(engine)
    assert _stored_predictions(engine) == {"legacy-v2": prediction}
    metrics, _ = _stored_json(engine)
    assert metrics == {"legacy-v2": {"metric_version": 2}, "unpredicted": {"metric_version": 2}}
    store = Store(engine)
    moved, unpredicted = store.runs.get_run("legacy-v2"), store.runs.get_run("unpredicted")
    assert moved is not None and moved.prediction is not None and moved.prediction.fitted_from == ("r1", "r2")
    assert moved.prediction.predicted_tokens_per_s == 99.0 and moved.prediction.model_version == 2
    assert unpredicted is not None and unpredicted.prediction is None
    db.downgrade(engine, "0010_autoverify")
    metrics, _ = _stored_json(engine)
    assert metrics["legacy-v2"] == {"metric_version": 2, "prediction": prediction}
    assert "run_prediction" not in inspect(engine).get_table_names()
    engine.dispose()


def test_0007_rewrites_legacy_runs_into_the_one_shape_and_back(database_url: str) -> None:
    engine = db.make_engine(database_url)
    db.upgrade(engine, BEFORE_0007)
    _insert_legacy_runs(engine)
    before, sets_before = _stored_json(engine)

    db.upgrade(engine)
    assert db.current_revision(engine) == db.head_revision()
    store = Store(engine)
    read = {run_id: store.runs.get_run(run_id) for run_id in before}
    v2, v1, llamacpp, sglang, failed = (read[k] for k in ("legacy-v2", "legacy-v1", "legacy-llamacpp",
                                                           "legacy-sglang", "legacy-failed"))
    assert v2 is not None and v1 is not None and llamacpp is not None and sglang is not None and failed is not None

    # The verifier runs: the same numbers as before, now read from the measurement.
    for run, version in ((v2, 2), (v1, 1)):
        assert run.metric_version == version
        assert (run.tau, run.acceptance_rate, run.baseline_tokens_per_s, run.tokens_per_s, run.speedup,
                run.efficiency) == (3.25, 0.5625, 50.0, 90.0, 1.8, 0.79)
        assert run.per_position_acceptance == (0.875, 0.625, 0.5, 0.25)
        assert run.overall is not None and run.overall.acceptance is not None
        assert run.overall.acceptance.histogram == (5, 10, 5, 10, 10)
        assert run.overall.speedup is not None and (run.overall.speedup.minimum, run.overall.speedup.maximum) == (1.7,
                                                                                                                1.95)
        assert run.settings is not None and (run.settings.repeats, run.settings.max_new_tokens) == (3, 32)
        assert (run.peak_memory_kind, run.draft_length, run.lossless) == ("process_rss_peak", 4, True)
        assert [(s.name, s.digest, s.tau, s.per_position_acceptance) for s in run.per_set] == [
            ("code", "digest-code", 3.25, (0.875, 0.625, 0.5, 0.25))]
    assert (v2.decode_speedup, v2.tau_emitted, v1.decode_speedup, v1.tau_emitted) == (1.9, 3.5, None, None)
    assert v2.forward_costs is not None and (v2.forward_costs.gamma, v2.forward_costs.verify_step_s) == (4, 0.014)
    assert v1.forward_costs is None
    assert v2.prediction is not None and v2.prediction.run_id == "legacy-v2"
    assert v2.prediction.fitted_from == ("r1", "r2") and v2.prediction.model_version == 2

    # llama.cpp's counters: the acceptance rebuilt from them, as the run's overall measurement and its one set.
    assert (llamacpp.metric_version, llamacpp.tau, llamacpp.acceptance_rate, llamacpp.tokens_per_s) == (
        1, 3.0, pytest.approx(2 / 3), 42.5)
    assert llamacpp.per_position_acceptance == (0.8, 0.7, 0.5)
    assert llamacpp.speedup is None and llamacpp.baseline_tokens_per_s is None
    counted = llamacpp.overall.acceptance  # type: ignore[union-attr]
    assert counted is not None
    assert (counted.rounds, counted.drafted, counted.accepted, counted.histogram) == (100, 300, 200, (20, 10, 20, 50))
    assert counted.conditional == pytest.approx((0.8, 0.875, 5 / 7))
    assert counted.uniform_draft_length and counted.identity_gap == pytest.approx(0.0)
    assert llamacpp.per_set == (llamacpp.overall,) and llamacpp.overall.name == "live-traffic"  # type: ignore[union-attr]

    # SGLang gives only its mean acceptance length: a reported τ, no acceptance counts.
    assert (sglang.metric_version, sglang.tau, sglang.acceptance_rate, sglang.tokens_per_s) == (1, 3.4, None, 120.0)
    assert sglang.per_position_acceptance == ()
    assert sglang.overall is not None and sglang.overall.acceptance is None and sglang.overall.reported_tau == 3.4
    assert sglang.per_set == (sglang.overall,)

    assert (failed.status, failed.failure_reason, failed.overall, failed.metric_version) == (
        "failed", "out of memory", None, 1)

    # Only columns kept: the measurement is rebuilt from them, run and set alike.
    bare = read["legacy-bare"]
    assert bare is not None and (bare.tau, bare.baseline_tokens_per_s, bare.tokens_per_s, bare.speedup,
                                 bare.efficiency, bare.metric_version) == (2.5, 21.4, 30.0, 1.4, 0.6, 1)
    assert [(s.name, s.digest, s.tau, s.speedup.median if s.speedup else None) for s in bare.per_set] == [
        ("chat", "digest-chat", 2.5, 1.4)]

    # The repeated keys are gone from the stored JSON; what the measurement is made of stays as it was.
    after, sets_after = _stored_json(engine)
    for run_id, metrics in after.items():
        assert not set(metrics) & set(REPEATED_BEFORE_0007), (run_id, sorted(metrics))
    assert after["legacy-v2"]["overall"] == before["legacy-v2"]["overall"]
    # The prediction moved to its own table (0011), unchanged.
    assert "prediction" not in after["legacy-v2"]
    assert _stored_predictions(engine) == {"legacy-v2": before["legacy-v2"]["prediction"]}
    assert after["legacy-v1"]["metric_version"] == 1 and after["legacy-failed"] == {"metric_version": 1}
    assert sets_after["legacy-v2"] == sets_before["legacy-v2"] and sets_after["legacy-v1"] == sets_before["legacy-v1"]
    assert sets_after["legacy-llamacpp"] == [after["legacy-llamacpp"]["overall"]]

    # Down again: the old keys are back with the values the old code wrote, so it reads every row as before.
    db.downgrade(engine, BEFORE_0007)
    assert db.current_revision(engine) == BEFORE_0007
    downgraded, _ = _stored_json(engine)
    for run_id in ("legacy-v2", "legacy-v1", "legacy-llamacpp", "legacy-sglang"):
        old = before[run_id]
        # identity_check is not restored: nothing before 0007 read it back.
        for key in set(old) - {"identity_check"}:
            assert downgraded[run_id].get(key) == old[key], (run_id, key)
    assert downgraded["legacy-v2"]["speedup_spread"] == SPEEDUP
    assert downgraded["legacy-llamacpp"]["marginal"] == [0.8, 0.7, 0.5]
    assert downgraded["legacy-sglang"]["tau"] == 3.4 and downgraded["legacy-sglang"]["tokens_per_s"] == 120.0
    engine.dispose()


def test_0012_stored_exact_verdicts_are_declared_until_recomputed_and_exact_again_on_downgrade(
    database_url: str,
) -> None:
    """A verdict stored "exact" by the old rules (a name alone declared, nothing checked) is not kept exact: it reads
    "declared" with why, until the rules recompute it; the downgrade gives the old code its "exact" back."""
    migration = _migration("0012_verdict_levels")
    engine = db.make_engine(database_url)
    # The repos are written by today's store (its models have columns 0011 lacks), then the schema goes back to
    # 0011, where the verdicts are stored as the old rules stored them.
    db.upgrade(engine)
    store = Store(engine)
    store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id="Qwen/Qwen3-8B", source="hub"))
    store.checkpoints.add_checkpoint_revision("Qwen/Qwen3-8B", RevisionSpec(
        sha="1" * 40, config_raw=json.dumps(QWEN3_8B_CONFIG).encode()))
    for repo_id, declared_by in (("z-lab/Qwen3-8B-DFlash-b16", "card_base_model"),
                                 ("anyone/Qwen3-8B-DFlash", "name_convention")):
        store.drafters.upsert_drafter(DrafterSpec(repo_id=repo_id, method="dflash", publisher=repo_id.split("/")[0],
                                                  source="hub", targets=(("Qwen/Qwen3-8B", declared_by),)))
        store.drafters.add_drafter_revision(repo_id, RevisionSpec(
            sha="2" * 40, config_raw=json.dumps(QWEN3_8B_DFLASH_CONFIG).encode()))
    db.downgrade(engine, "0011_predictions")
    with engine.begin() as connection:
        connection.execute(Compatibility.__table__.delete())
        revisions = {name: connection.execute(select(table.c.id)).scalars().all()
                     for name, table in (("c", Base.metadata.tables["checkpoint_revision"]),
                                         ("d", Base.metadata.tables["drafter_revision"]))}
        for drafter_revision in revisions["d"]:
            connection.execute(Compatibility.__table__.insert().values(
                drafter_revision_id=drafter_revision, checkpoint_revision_id=revisions["c"][0], verdict="exact",
                reasons=["declared for Qwen/Qwen3-8B"], checks=[], checked_at=CREATED))
    db.upgrade(engine)
    stored = {v.drafter_repo_id: v for v in store.reads.verdicts()}
    assert {d: (v.verdict, v.reasons) for d, v in stored.items()} == {
        d: ("declared", (migration.STALE, "declared for Qwen/Qwen3-8B")) for d in stored}
    assert len(stored) == 2
    # The rules decide once they run: the card's declaration with the checks passing is exact, the name is none.
    assert {v.drafter_repo_id: v.verdict for v in store.verdicts.recompute_compatibility()} == {
        "z-lab/Qwen3-8B-DFlash-b16": "exact", "anyone/Qwen3-8B-DFlash": "structural"}
    with engine.begin() as connection:
        connection.execute(Compatibility.__table__.update().values(
            verdict="declared", reasons=[migration.STALE, "declared for Qwen/Qwen3-8B"]))
    db.downgrade(engine, "0011_predictions")
    with engine.connect() as connection:
        rows = connection.execute(select(Compatibility.verdict, Compatibility.reasons)).all()
    assert [(verdict, list(reasons)) for verdict, reasons in rows] == [("exact", ["declared for Qwen/Qwen3-8B"])] * 2
    engine.dispose()


def test_0016_fills_the_name_key_of_stored_checkpoints_and_drops_it_keeping_the_rows(database_url: str) -> None:
    """Checkpoints stored before 0016 get their name key, so a drafter's name finds them as it finds new ones; the
    downgrade drops the column in place, the checkpoints and their revisions kept."""
    engine = db.make_engine(database_url)
    db.upgrade(engine, "0014_run_hardware_recent")
    checkpoint, revision = Base.metadata.tables["checkpoint"], Base.metadata.tables["checkpoint_revision"]
    with engine.begin() as connection:
        for pk, repo_id in enumerate(("Qwen/Qwen3-8B", "someone/qwen_3-8b", "Qwen/Qwen3-8B-Base"), start=1):
            connection.execute(checkpoint.insert().values(id=pk, repo_id=repo_id, org=repo_id.split("/")[0],
                                                          kind="base", source="hub", first_seen=CREATED))
            connection.execute(revision.insert().values(checkpoint_id=pk, sha=f"{pk}" * 40, seen_at=CREATED))
    db.upgrade(engine)
    with engine.connect() as connection:
        keys = dict(connection.execute(select(checkpoint.c.repo_id, checkpoint.c.name_key)).all())
    assert keys == {"Qwen/Qwen3-8B": "qwen-3-8b", "someone/qwen_3-8b": "qwen-3-8b",
                    "Qwen/Qwen3-8B-Base": "qwen-3-8b-base"}
    store = Store(engine)
    assert [c.repo_id for c in store.reads.checkpoints_named("qwen-3-8b")] == ["Qwen/Qwen3-8B", "someone/qwen_3-8b"]
    db.downgrade(engine, "0014_run_hardware_recent")
    assert "name_key" not in {c["name"] for c in inspect(engine).get_columns("checkpoint")}
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(checkpoint)).scalar() == 3
        assert connection.execute(select(func.count()).select_from(revision)).scalar() == 3
    engine.dispose()
