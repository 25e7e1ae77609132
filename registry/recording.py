"""Recording a measured run: the run, its regression event and the pricing model's prediction of it, as one unit
of work. Both runners (verifier/jobs.py's verify_now and verifier/ingest.py) store their runs here and nowhere
else, so a measurement is never found without its event or its prediction, and the sequence exists once.

It sits above the store and beside calibration, not in either, because predicting a run reads the store (the
run's fit group, its target's and drafter's sizes) and a run is stored with that prediction: it is the one caller
of both. The store's `unit()` makes every read and write in it one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy.exc import IntegrityError

from registry import calibration
from registry.domain.records import EventSpec
from registry.domain.run import Run
from registry.store import Store


class RecordingFailed(RuntimeError):
    """A measured run could not be stored with its event and prediction; nothing of it was stored (the message
    says which step failed and why), so recording it again starts from nothing."""


def record_measurement(store: Store, run: Run) -> Run:
    """Store a run, its `acceptance_regressed` event when τ fell, and the current pricing model's prediction of
    it (from the runs stored before it), in one transaction: all three land or none does. A failed run gets
    neither. Recording the same run_id again (a job retried after its worker died) returns the stored run and
    writes nothing new; a stored run without a current-model prediction gets one. Returns the run as stored."""
    step = "storing the run"
    try:
        with store.unit():
            record = store.runs.record_run(run)
            step = "the regression check"
            event = store.runs.regression_event(record)
            if event is not None:
                store.events.record_event(event)  # once per dedupe key: a rerun records nothing
            if record.status != "ok" or calibration.stored_prediction(record) is not None:
                return record
            step = "the prediction"
            prediction = calibration.predict_one(store, record)
            store.runs.set_predictions({record.run_id: prediction})
            return replace(record, prediction=prediction)
    except IntegrityError as exc:
        # Another worker stored the same run_id (with its event and prediction) between our read and our insert.
        stored = store.runs.get_run(run.run_id) if run.run_id else None
        if stored is not None and step == "storing the run":
            return stored
        raise _failed(run, step, exc) from exc
    except Exception as exc:
        raise _failed(run, step, exc) from exc


def _failed(run: Run, step: str, error: Exception) -> RecordingFailed:
    first_line = (str(error).splitlines() or [""])[0]
    pair = f"{run.drafter} on {run.target}" if run.drafter else run.target
    return RecordingFailed(f"run {run.run_id or '(new)'} of {pair} was not stored, nothing of it was written: "
                           f"{step} failed ({type(error).__name__}: {first_line})")


def record_events(store: Store, specs: Sequence[EventSpec]) -> list[str]:
    """Events a runner raised without a run of their own (a server probe that drafted nothing), each once per dedupe
    key; returns the types recorded now."""
    return [spec.type for spec in specs if store.events.record_event(spec) is not None]
