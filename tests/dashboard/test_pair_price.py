"""The Pair page's price across GPU classes: every catalog card, from the newest run's measured acceptance."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from registry import calibration
from registry.domain.gpus import load_gpus
from registry.domain.measurement import RunSettings
from registry.recording import record_measurement
from registry.store.runs import Run
from tests.registry.run_fixtures import measured as measurement
from tests.dashboard.conftest import DFLASH_8B, QWEN3_8B, Seeded, assert_clean, chart_data, frame_with, run_page


def test_pair_page_prices_the_pair_on_every_gpu_class(dashboard_db: Seeded) -> None:
    app = run_page("pair", query_params={"target": QWEN3_8B, "drafter": DFLASH_8B})
    assert_clean(app)
    table = frame_with(app, "best γ").set_index("GPU")
    assert set(table.index) == {g.name for g in load_gpus()}
    assert table["best γ"].between(1, 4).all()  # the seeded runs measured four positions
    assert bool(table.loc["H200", "fits"]) and table.loc["H200", "speedup"] > 1
    newest = dashboard_db.run_ids[-1]
    assert any(newest[:12] in caption.value for caption in app.caption)
    points = next(frame for frames in chart_data(app) for frame in frames if "series" in frame.columns)
    assert set(points["series"]) == {"alone", "with drafter"} and len(points) == 2 * len(table)

    app.selectbox(key="price_quant").set_value("bf16").run()
    assert_clean(app)
    bf16 = frame_with(app, "best γ").set_index("GPU")
    assert not bool(bf16.loc["RTX 3060 12GB", "fits"]) and bool(bf16.loc["H200", "fits"])


def test_runs_show_the_pricing_models_prediction_and_error(dashboard_db: Seeded) -> None:
    """A measured run with tokens/s is predicted (stored when recorded through the calibration); the seeded runs
    without tokens/s show no prediction and say why; both the Pair page and the Benchmarks page show it."""
    store = dashboard_db.store
    measured = []
    for day, baseline in enumerate((60.0, 64.0, 62.0)):
        record = store.runs.record_run(Run(
            target=QWEN3_8B, drafter=DFLASH_8B, method="dflash", hardware="H200", engine="pytorch",
            settings=RunSettings(dtype="bfloat16", draft_length=4), draft_length=4,
            overall=measurement(tau=3.0, marginal=(0.8, 0.6, 0.4, 0.2), baseline_tokens_per_s=baseline,
                                tokens_per_s=baseline * 2, speedup=2.0),
            per_set=(measurement("gsm8k", "digest-gsm8k", speedup=2.0, tau=3.0, marginal=(0.8, 0.6, 0.4, 0.2)),),
            created_at=datetime(2026, 12, 1 + day, tzinfo=UTC)))
        measured.append(record_measurement(store, record))
    stored = {r.run_id: r.prediction for r in measured}
    assert all(p is not None and p == calibration.stored_prediction(r) for r, p in zip(measured, stored.values()))
    # The first is priced at the assumed efficiency (no other GPU run yet); the third from the two before it.
    assert "assumed efficiency" in stored[measured[0].run_id].device_basis
    assert set(stored[measured[2].run_id].fitted_from) == {measured[0].run_id, measured[1].run_id}
    app = run_page("pair", query_params={"target": QWEN3_8B, "drafter": DFLASH_8B})
    assert_clean(app)
    runs = frame_with(app, "prediction_note").set_index("run_id")
    for run_id, prediction in stored.items():
        # Columns with gaps are shown as text to 4 significant digits, a dash for a gap.
        assert float(runs.loc[run_id, "predicted_tokens_per_s"]) == pytest.approx(
            prediction.predicted_tokens_per_s, rel=1e-3)
        assert float(runs.loc[run_id, "tokens_per_s_error"]) == pytest.approx(prediction.tokens_per_s_error,
                                                                              rel=1e-3)
        assert runs.loc[run_id, "prediction_source"] == "stored with the run"
    for run_id in dashboard_db.run_ids:
        assert "no tokens/s" in runs.loc[run_id, "prediction_note"]
        assert runs.loc[run_id, "predicted_tokens_per_s"] == "-"
    assert any("median |error|" in caption.value for caption in app.caption)

    bench = run_page("benchmarks")
    assert_clean(bench)
    table = frame_with(bench, "prediction_note").set_index("run_id")
    assert set(stored) <= set(table.index)
    for run_id, prediction in stored.items():
        assert float(table.loc[run_id, "speedup_error"]) == pytest.approx(prediction.speedup_error, rel=1e-3)
