"""Benchmark runs: every measured (target, drafter) result with its provenance, failed ones included."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from registry.store.models import BenchmarkRun, RunSetResult
from registry.store.records import EventSpec
from registry.store.core import Store, aware, utcnow

# τ falling by more than this fraction against the previous comparable run is a regression worth an alert.
REGRESSION_FRACTION = 0.10
# Metric definitions (verifier.metrics METRIC_VERSION) a run's numbers were measured under; runs stored before
# versions existed are version 1. An ok run's `metrics` hold, from version 2: "metric_version", "tau_emitted",
# "decode_speedup", "speedup_spread", and "forward_costs" = {"context_length", "gamma", "target_step_s" (T(1)),
# "verify_step_s" (T(γ+1)), "draft_step_s", "repeats", "spread"} (None where the engine cannot time forwards).
FIRST_METRIC_VERSION = 1


def metric_version(run: RunSpec) -> int:
    return int(run.metrics.get("metric_version") or FIRST_METRIC_VERSION)


@dataclass(frozen=True)
class SetResult:
    prompt_set: str
    prompt_set_digest: str
    tau: float | None = None
    tau_spread: float | None = None
    acceptance_rate: float | None = None
    per_position_acceptance: tuple[float, ...] = ()
    baseline_tokens_per_s: float | None = None
    tokens_per_s: float | None = None
    speedup: float | None = None
    speedup_spread: float | None = None
    lossless: bool | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSpec:
    target: str
    drafter: str | None
    status: str = "ok"
    failure_reason: str | None = None
    job_id: int | None = None
    engine: str = "pytorch"
    engine_version: str | None = None
    target_revision: str | None = None
    drafter_revision: str | None = None
    method: str | None = None
    draft_length: int | None = None
    temperature: float = 0.0
    seed: int | None = None
    dtype: str | None = None
    device_name: str | None = None
    hardware: str | None = None
    torch_version: str | None = None
    transformers_version: str | None = None
    lossless: bool | None = None
    tau: float | None = None
    acceptance_rate: float | None = None
    baseline_tokens_per_s: float | None = None
    tokens_per_s: float | None = None
    speedup: float | None = None
    efficiency: float | None = None
    peak_memory_bytes: int | None = None
    target_weight_bytes: int | None = None
    drafter_weight_bytes: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    sets: tuple[SetResult, ...] = ()
    run_id: str | None = None  # chosen by the store unless the caller needs it up front
    created_at: datetime | None = None


@dataclass(frozen=True)
class RunRecord(RunSpec):
    pass


_RUN_COLUMNS = [f.name for f in fields(RunSpec) if f.name not in ("sets", "run_id", "created_at")]
_SET_COLUMNS = [f.name for f in fields(SetResult)]


def record_run(store: Store, spec: RunSpec) -> RunRecord:
    """Store a run once per run_id; recording the same run_id again returns the stored run."""
    run_id = spec.run_id or uuid.uuid4().hex
    with store.session() as session:
        existing = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == run_id))
        if existing is not None:
            return _run_record(existing)
        values = {name: getattr(spec, name) for name in _RUN_COLUMNS}
        values["metrics"], values["provenance"] = _as_json(spec.metrics), _as_json(spec.provenance)
        row = BenchmarkRun(run_id=run_id, created_at=spec.created_at or utcnow(), **values)
        for result in spec.sets:
            values = {name: getattr(result, name) for name in _SET_COLUMNS}
            values["per_position_acceptance"] = list(result.per_position_acceptance)
            values["metrics"] = _as_json(result.metrics)
            row.set_results.append(RunSetResult(**values))
        session.add(row)
        session.flush()
        return _run_record(row)


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
        return _run_record(row) if row else None


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
    """Newest first."""
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
        return [_run_record(row) for row in session.scalars(query)]


def _run_record(row: BenchmarkRun) -> RunRecord:
    sets = tuple(
        SetResult(
            **{
                **{name: getattr(result, name) for name in _SET_COLUMNS},
                "per_position_acceptance": tuple(result.per_position_acceptance or ()),
                "metrics": dict(result.metrics or {}),
            }
        )
        for result in sorted(row.set_results, key=lambda r: r.prompt_set)
    )
    values = {name: getattr(row, name) for name in _RUN_COLUMNS}
    values["metrics"] = dict(row.metrics or {})
    values["provenance"] = dict(row.provenance or {})
    return RunRecord(**values, sets=sets, run_id=row.run_id, created_at=aware(row.created_at))


def regression_event(store: Store, run: RunRecord) -> EventSpec | None:
    """An `acceptance_regressed` event when τ fell against the previous comparable run of the same pair.

    Comparable = same target, drafter, engine, hardware, method, temperature, prompt sets and metric version; runs
    on other hardware or prompts, or measured under other metric definitions, are a different series and never
    compared.
    """
    if run.status != "ok" or run.tau is None or run.drafter is None:
        return None
    # The newest few runs of the series are enough: the comparison is with the latest comparable one.
    recent = list_runs(store, target=run.target, drafter=run.drafter, status="ok", engine=run.engine,
                       hardware=run.hardware, method=run.method, limit=20)
    previous = [
        r
        for r in recent
        if r.run_id != run.run_id
        and r.temperature == run.temperature
        and metric_version(r) == metric_version(run)
        and {s.prompt_set: s.prompt_set_digest for s in r.sets} == {s.prompt_set: s.prompt_set_digest for s in run.sets}
        and r.tau is not None
        and r.created_at is not None
        and run.created_at is not None
        and r.created_at <= run.created_at
    ]
    if not previous:
        return None
    last = previous[0]
    if run.tau >= last.tau * (1 - REGRESSION_FRACTION):  # type: ignore[operator]
        return None
    changed = []
    if last.target_revision != run.target_revision:
        changed.append(f"target {str(last.target_revision)[:8]} -> {str(run.target_revision)[:8]}")
    if last.drafter_revision != run.drafter_revision:
        changed.append(f"drafter {str(last.drafter_revision)[:8]} -> {str(run.drafter_revision)[:8]}")
    return EventSpec(
        type="acceptance_regressed",
        subject=run.drafter,
        dedupe_key=f"acceptance_regressed:{run.run_id}",
        payload={
            "message": f"τ of {run.drafter} on {run.target} fell {last.tau:.2f} -> {run.tau:.2f}"
            + (f" ({'; '.join(changed)})" if changed else " (no revision changed)"),
            "target": run.target,
            "previous_run": last.run_id,
            "run": run.run_id,
            "previous_tau": last.tau,
            "tau": run.tau,
            "hardware": run.hardware,
        },
        org=run.drafter.split("/", 1)[0] if run.drafter.count("/") == 1 else None,
    )
