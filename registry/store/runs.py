"""Benchmark runs: every measured (target, drafter) result with its provenance, failed ones included."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from registry.domain.regression import regression
from registry.store import Store
from registry.store.core import utcnow
from registry.store.mappers import RUN_COLUMNS, SET_COLUMNS, run_record
from registry.store.models import BenchmarkRun, RunSetResult
from registry.store.records import EventSpec, RunRecord, RunSpec

__all__ = ["PREDICTION_KEY", "RunRecord", "RunSpec", "get_run", "list_runs", "record_run",
           "regression_event", "set_predictions"]
# Where a run's price prediction sits in its metrics (registry.calibration writes it).
PREDICTION_KEY = "prediction"


def record_run(store: Store, spec: RunSpec) -> RunRecord:
    """Store a run once per run_id; recording the same run_id again returns the stored run. A drafter named by
    an old id (a job queued before the repo was renamed) is stored under its current id, as its earlier runs are."""
    run_id = spec.run_id or uuid.uuid4().hex
    drafter = _current_drafter_id(store, spec.drafter)
    with store.session() as session:
        existing = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == run_id))
        if existing is not None:
            return run_record(existing)
        values = {name: getattr(spec, name) for name in RUN_COLUMNS}
        values["drafter"] = drafter
        values["metrics"], values["provenance"] = _as_json(spec.metrics), _as_json(spec.provenance)
        row = BenchmarkRun(run_id=run_id, created_at=spec.created_at or utcnow(), **values)
        for result in spec.sets:
            values = {name: getattr(result, name) for name in SET_COLUMNS}
            values["per_position_acceptance"] = list(result.per_position_acceptance)
            values["metrics"] = _as_json(result.metrics)
            row.set_results.append(RunSetResult(**values))
        session.add(row)
        session.flush()
        return run_record(row)


def _current_drafter_id(store: Store, drafter: str | None) -> str | None:
    """The id the registry records this drafter under now (renames followed); anything else (a local folder, a
    drafter not in the registry) as given."""
    record = store.get_drafter(drafter) if drafter is not None else None
    return record.repo_id if record is not None else drafter


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no inf or NaN; PostgreSQL's JSON refuses them
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _as_json(value: dict[str, Any]) -> dict[str, Any]:
    """What the JSON column will hand back (lists, not tuples; no inf or NaN), so the record we return equals
    the one read later."""
    return json.loads(json.dumps(_finite(value), default=str))


def get_run(store: Store, run_id: str) -> RunRecord | None:
    with store.session() as session:
        row = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == run_id))
        return run_record(row) if row else None


def list_runs(
    store: Store,
    *,
    target: str | None = None,
    drafter: str | None = None,
    status: str | None = None,
    engine: str | None = None,
    hardware: str | None = None,
    method: str | None = None,
    limit: int | None = None,
) -> list[RunRecord]:
    """Newest first; a drafter's old id (before a rename) finds its runs too."""
    drafter = _current_drafter_id(store, drafter)
    with store.session() as session:
        query = (
            select(BenchmarkRun)
            .options(selectinload(BenchmarkRun.set_results))
            .order_by(BenchmarkRun.created_at.desc(), BenchmarkRun.id.desc())
        )
        if hardware is not None:
            query = query.where(BenchmarkRun.hardware == hardware)
        if method is not None:
            query = query.where(BenchmarkRun.method == method)
        if target is not None:
            query = query.where(BenchmarkRun.target == target)
        if drafter is not None:
            query = query.where(BenchmarkRun.drafter == drafter)
        if status is not None:
            query = query.where(BenchmarkRun.status == status)
        if engine is not None:
            query = query.where(BenchmarkRun.engine == engine)
        if limit is not None:
            query = query.limit(limit)
        return [run_record(row) for row in session.scalars(query)]


def regression_event(store: Store, run: RunRecord) -> EventSpec | None:
    """An `acceptance_regressed` event when τ fell against the previous comparable run of the same pair (the rule
    is registry.domain.regression's)."""
    if run.status != "ok" or run.tau is None or run.drafter is None:
        return None
    # The newest few runs of the series are enough: the comparison is with the latest comparable one.
    recent = list_runs(store, target=run.target, drafter=run.drafter, status="ok", engine=run.engine,
                       hardware=run.hardware, method=run.method, limit=20)
    found = regression(run, recent)
    if found is None:
        return None
    return EventSpec(type=found.type, subject=found.subject, dedupe_key=found.dedupe_key, payload=found.payload,
                     org=found.org)


def set_predictions(store: Store, predictions: Mapping[str, dict[str, Any]]) -> int:
    """Write each run's prediction (run id -> the stored prediction) into its metrics under PREDICTION_KEY;
    returns how many runs changed. Unknown run ids are skipped."""
    changed = 0
    with store.session() as session:
        for row in session.scalars(select(BenchmarkRun).where(BenchmarkRun.run_id.in_(list(predictions)))):
            value = predictions[row.run_id]
            metrics = dict(row.metrics or {})
            if metrics.get(PREDICTION_KEY) != value:
                metrics[PREDICTION_KEY] = value
                row.metrics = metrics  # a new dict, so the JSON column sees the change
                changed += 1
    return changed
