"""Speedup curves: each `drafters sweep` stored once as one series (its points, conditions and provenance)."""

from __future__ import annotations

from sqlalchemy import select

from registry.domain.curve import CurvePoint, SpeedupCurve, SweepConditions
from registry.domain.stored_json import from_json, to_json
from registry.store.core import StoreCore, aware, utcnow
from registry.store.models import SpeedupCurveRow


class Curves:
    """Record a sweep's curve; read a pair's curves back, newest first."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def record_curve(self, curve: SpeedupCurve) -> SpeedupCurve:
        points = sorted(curve.points, key=lambda p: p.concurrency)
        with self.core.session() as session:
            row = SpeedupCurveRow(
                target=curve.target, drafter=curve.drafter, engine=curve.engine, engine_version=curve.engine_version,
                hardware=curve.hardware, crossover=curve.crossover, conditions=to_json(curve.conditions),
                points=[to_json(p) for p in points], provenance=dict(curve.provenance), created_at=utcnow(),
                job_id=curve.job_id)
            session.add(row)
            session.flush()
            return _curve(row)

    def curves(self, *, target: str | None = None, drafter: str | None = None, job_id: int | None = None,
               limit: int = 100) -> list[SpeedupCurve]:
        query = select(SpeedupCurveRow).order_by(SpeedupCurveRow.created_at.desc(), SpeedupCurveRow.id.desc())
        if job_id is not None:
            query = query.where(SpeedupCurveRow.job_id == job_id)
        if target is not None:
            query = query.where(SpeedupCurveRow.target == target)
        if drafter is not None:
            query = query.where(SpeedupCurveRow.drafter == drafter)
        with self.core.session() as session:
            return [_curve(row) for row in session.scalars(query.limit(limit))]


def _curve(row: SpeedupCurveRow) -> SpeedupCurve:
    return SpeedupCurve(
        target=row.target, drafter=row.drafter, engine=row.engine, engine_version=row.engine_version,
        hardware=row.hardware, conditions=from_json(SweepConditions, row.conditions),
        points=tuple(from_json(CurvePoint, p) for p in row.points), provenance=dict(row.provenance),
        job_id=row.job_id, curve_id=row.id, created_at=aware(row.created_at))
