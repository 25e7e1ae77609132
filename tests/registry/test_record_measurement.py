"""Recording a measurement is one unit of work: the run, its regression event and its prediction land together or
not at all, a rerun adds nothing, and the prediction reads only the runs it is fitted from."""

from __future__ import annotations

from dataclasses import replace

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from registry import calibration
from registry.domain.measurement import ForwardCosts
from registry.domain.run import Run
from registry.recording import RecordingFailed, record_measurement
from registry.store import Store
from registry.store.models import BenchmarkRun, Event, RunPredictionRow
from tests.conftest import REPO_ROOT
from tests.registry.run_fixtures import measured

T0 = datetime(2026, 11, 1, tzinfo=UTC)
TARGET, DRAFTER = "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16"


def _run(*, hardware: str | None, baseline: float, minutes: int, tau_drop: float = 0.0, engine: str = "llama.cpp",
         costs: ForwardCosts | None = None, status: str = "ok", run_id: str | None = None) -> Run:
    marginal = (0.8 - tau_drop, 0.6 - tau_drop)
    return Run(
        target=TARGET, drafter=DRAFTER, engine=engine, method="dflash", hardware=hardware, draft_length=2,
        status=status, failure_reason="oom" if status != "ok" else None,
        target_weight_bytes=4_900_000_000, drafter_weight_bytes=2_100_000_000, forward_costs=costs,
        overall=measured(marginal=marginal, baseline_tokens_per_s=baseline, tokens_per_s=baseline * 2, speedup=2.0)
        if status == "ok" else None,
        per_set=(measured("code", "d1", marginal=marginal),) if status == "ok" else (),
        created_at=T0 + timedelta(minutes=minutes), run_id=run_id)


def _counts(store: Store) -> tuple[int, int, int]:
    with store.session() as session:
        return tuple(session.scalar(select(func.count()).select_from(table))  # type: ignore[return-value]
                     for table in (BenchmarkRun, Event, RunPredictionRow))


def test_a_run_its_regression_event_and_its_prediction_land_together_and_a_rerun_adds_nothing(store: Store) -> None:
    for minutes, baseline in enumerate((10.0, 12.0)):
        record_measurement(store, _run(hardware="cpu (test)", baseline=baseline, minutes=minutes))
    regressed = _run(hardware="cpu (test)", baseline=11.0, minutes=5, tau_drop=0.5, run_id="regressed")
    recorded = record_measurement(store, regressed)
    assert recorded.prediction is not None and recorded.prediction.predicted_baseline_tokens_per_s == pytest.approx(11)
    assert store.runs.get_run("regressed") == recorded
    assert [e.type for e in store.events.events()] == ["acceptance_regressed"]
    assert _counts(store) == (3, 1, 3)
    # A retried job records the same run id again: the stored run back, nothing new written.
    assert record_measurement(store, regressed) == recorded
    assert _counts(store) == (3, 1, 3)
    # A failed run is stored without a prediction.
    failed = record_measurement(store, _run(hardware="cpu (test)", baseline=0, minutes=6, status="failed"))
    assert failed.prediction is None and _counts(store) == (4, 1, 3)


@pytest.mark.parametrize("step", ["the regression check", "the prediction"])
def test_a_failure_part_way_leaves_nothing_and_says_which_step_failed(
    store: Store, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    for minutes, baseline in enumerate((10.0, 12.0)):
        record_measurement(store, _run(hardware="cpu (test)", baseline=baseline, minutes=minutes))
    before = _counts(store)
    regressed = _run(hardware="cpu (test)", baseline=11.0, minutes=5, tau_drop=0.5, run_id="regressed")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk full\nsecond line")

    if step == "the prediction":  # after the run and its event were written in the transaction
        monkeypatch.setattr(calibration, "predict_one", broken)
    else:
        monkeypatch.setattr(store.events, "record_event", broken)
    with pytest.raises(RecordingFailed) as failure:
        record_measurement(store, regressed)
    assert str(failure.value) == (f"run regressed of {DRAFTER} on {TARGET} was not stored, nothing of it was "
                                  f"written: {step} failed (RuntimeError: disk full)")
    assert store.runs.get_run("regressed") is None and _counts(store) == before
    # Recording it again once the cause is gone converges to one run, one event, one prediction.
    monkeypatch.undo()
    assert record_measurement(store, regressed).prediction is not None
    assert _counts(store) == (before[0] + 1, before[1] + 1, before[2] + 1)


def _costs(scale: float) -> ForwardCosts:
    # Time = bytes / bandwidth + 5 ms per forward (the target step reads 3.7 GB, the drafting step 3.3 GB), so
    # the least-squares fit of bandwidth and overhead comes out positive.
    return ForwardCosts.from_timings(256, 2, [0.0185 * scale + 0.005], [0.03 * scale + 0.005],
                                     [0.01675 * scale + 0.005])


def test_recording_predicts_from_the_fit_group_the_same_numbers_as_the_full_scan(store: Store) -> None:
    """Catalog GPUs of several kinds (one efficiency fitted across all of them), CPU boxes with and without
    forward costs and two engines (bandwidth and overhead fitted per hardware), runs naming no hardware, failed
    runs and runs without tokens/s: each run's group prediction equals the one from every stored run."""
    specs: list[dict[str, object]] = []
    for i, hardware in enumerate(("RTX 3090", "NVIDIA GeForce RTX 4090", "H200", "A100 80GB", "RTX 3090")):
        specs.append({"hardware": hardware, "baseline": 60.0 + 17 * i})
    for i in range(6):
        specs.append({"hardware": "cpu (box a)", "baseline": 9.0 + i, "engine": "pytorch" if i % 2 else "llama.cpp",
                      "costs": _costs(1.0 + 0.3 * i) if i % 3 else None})
    for i in range(4):
        specs.append({"hardware": "cpu (box b)", "baseline": 20.0 + 3 * i, "engine": "pytorch",
                      "costs": _costs(0.5 + 0.2 * i)})
    for i in range(3):
        specs.append({"hardware": None, "baseline": 5.0 + i})
    specs += [{"hardware": "H200", "baseline": 0.0, "status": "failed"},
              {"hardware": "cpu (box a)", "baseline": 0.0}]  # ok, but no tokens/s: never a peer
    ids = []
    for minutes, spec in enumerate(specs):
        ids.append(store.runs.record_run(_run(minutes=minutes, **spec)).run_id)  # type: ignore[arg-type]
    full_scan = {p.run_id: p for p in calibration.predict_runs(store)}
    assert sum(p.predicted for p in full_scan.values()) >= 14  # the mix is priced, not refused
    assert sum("least squares" in p.device_basis for p in full_scan.values()) >= 4  # the overhead fit is used
    for run_id in ids:
        run = store.runs.get_run(run_id)
        assert run is not None
        grouped = calibration.predict_one(store, run)
        if run_id in full_scan:
            assert grouped == full_scan[run_id], run.hardware
        else:
            assert not grouped.predicted
    gpu_predictions = [full_scan[i] for i in ids[:5]]
    assert all(len(p.fitted_from) == 4 for p in gpu_predictions)  # every OTHER catalog GPU run, whatever its card


def test_a_prediction_is_fitted_from_the_most_recent_runs_of_its_machine_only(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording a run reads a bounded sample of its machine's history (FIT_SAMPLE runs), not every run the
    machine stored: the newest other runs with a speed, the same ones predict_runs fits it from."""
    monkeypatch.setattr(calibration, "FIT_SAMPLE", 4)
    ids = [store.runs.record_run(_run(hardware="cpu (box)", baseline=10.0 + i, minutes=i,
                                      costs=_costs(1.0 + 0.1 * i))).run_id for i in range(9)]
    store.runs.record_run(_run(hardware="cpu (box)", baseline=0.0, minutes=20))  # newest, but no speed: never a peer
    store.runs.record_run(_run(hardware="cpu (other)", baseline=50.0, minutes=21))  # another machine
    latest = record_measurement(store, _run(hardware="cpu (box)", baseline=15.0, minutes=30, run_id="latest"))
    assert latest.prediction is not None and latest.prediction.predicted
    assert set(latest.prediction.fitted_from) == set(ids[-4:])
    full_scan = {p.run_id: p for p in calibration.predict_runs(store)}
    assert full_scan["latest"] == latest.prediction
    oldest = store.runs.get_run(ids[0])
    assert oldest is not None and set(full_scan[ids[0]].fitted_from) == {"latest", *ids[-3:]}
    assert calibration.predict_one(store, oldest) == full_scan[ids[0]]



def test_runs_that_cannot_feed_pricing_among_the_newest_do_not_shrink_the_sample(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read is the sample and the run itself; when some of those cannot feed pricing (lossy here), a second,
    twice as wide read fills the sample, as predict_runs would."""
    monkeypatch.setattr(calibration, "FIT_SAMPLE", 4)
    ids = [store.runs.record_run(_run(hardware="cpu (box)", baseline=10.0 + i, minutes=i,
                                      costs=_costs(1.0 + 0.1 * i))).run_id for i in range(9)]
    for minutes in (20, 21):  # the newest, but not lossless: never a peer
        store.runs.record_run(replace(_run(hardware="cpu (box)", baseline=12.0, minutes=minutes), lossless=False))
    reads: list[int] = []
    real = store.runs.recent_ok_runs_on_hardware
    monkeypatch.setattr(store.runs, "recent_ok_runs_on_hardware",
                        lambda names, limit: reads.append(limit) or real(names, limit))
    latest = record_measurement(store, _run(hardware="cpu (box)", baseline=15.0, minutes=30, run_id="latest"))
    assert latest.prediction is not None and set(latest.prediction.fitted_from) == set(ids[-4:])
    assert reads == [5, 10]  # the sample and the run, then twice that
    assert {p.run_id: p for p in calibration.predict_runs(store)}["latest"] == latest.prediction
    for minutes in (31, 32, 33):
        store.runs.record_run(_run(hardware="cpu (box)", baseline=14.0, minutes=minutes, costs=_costs(1.2)))
    reads.clear()
    record_measurement(store, _run(hardware="cpu (box)", baseline=16.0, minutes=40, run_id="next"))
    assert reads == [5]  # the 4 newest others can all feed pricing: one read

def test_hardware_names_lists_each_name_once(store: Store) -> None:
    for minutes, hardware in enumerate(("b", "a", None, "b", "c", "a")):
        store.runs.record_run(_run(hardware=hardware, baseline=1.0, minutes=minutes))
    assert store.runs.hardware_names() == ["a", "b", "c"]


RECORDING_SEQUENCE = {"record_run", "regression_event", "set_predictions", "record_event", "predict_one"}


def test_the_runners_record_runs_only_through_record_measurement() -> None:
    """verifier/ (verify_now, ingest) and the command line never store a run's parts one by one."""
    found = []
    for path in sorted([*Path(REPO_ROOT, "verifier").rglob("*.py"), *Path(REPO_ROOT, "drafters").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name in RECORDING_SEQUENCE:
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {name}")
    assert found == []
    uses = [path.name for path in (REPO_ROOT / "verifier").glob("*.py")
            if "record_measurement(" in path.read_text(encoding="utf-8")]
    assert sorted(uses) == ["doctor.py", "ingest.py", "jobs.py"]
