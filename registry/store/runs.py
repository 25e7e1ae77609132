"""Benchmark runs: every measured (target, drafter) result with its provenance, failed ones included."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import datetime

from sqlalchemy import and_, or_, select, text
from sqlalchemy.orm import selectinload

from registry.domain.records import EventSpec
from registry.domain.regression import regression
from registry.domain.run import Run, RunPrediction
from registry.domain.stored_json import from_json, to_json
from registry.store.checkpoints import Checkpoints
from registry.store.core import NotFound, StoreCore, aware, utcnow
from registry.store.mappers import prediction_row, run_record, run_values, set_values
from registry.store.models import BenchmarkRun, RunSetResult
from registry.store.reads import Reads

__all__ = ["Run", "Runs"]


# The distinct hardware names by a loose index scan: one index probe per name (each the smallest name above the
# last), so reading a few dozen names costs the same with a thousand runs stored as with a hundred thousand, where
# SELECT DISTINCT walks the whole index. Plain SQL that SQLite and PostgreSQL both run.
_HARDWARE_NAMES = text("""
WITH RECURSIVE names(hardware) AS (
    SELECT MIN(hardware) FROM benchmark_run
    UNION ALL
    SELECT (SELECT MIN(b.hardware) FROM benchmark_run AS b WHERE b.hardware > names.hardware)
    FROM names WHERE names.hardware IS NOT NULL
)
SELECT hardware FROM names WHERE hardware IS NOT NULL
""")


class Runs:
    """Record a run once per run id; read runs back (renames followed); a run's regression event; store predictions;
    the pricing model's sample and the hardware names."""

    def __init__(self, core: StoreCore, checkpoints: Checkpoints, reads: Reads) -> None:
        self.core = core
        self.checkpoints = checkpoints
        self.reads = reads

    def record_run(self, run: Run) -> Run:
        """Store a run once per run_id; recording the same run_id again returns the stored run. A drafter or target
        named by an old id (a job queued before the repo was renamed) is stored under its current id, as its earlier
        runs are. A measured run is recorded by registry.recording.record_measurement (with its event and
        prediction, in one transaction); this is its first write.
        Returns the run as it reads back (its id and time set, JSON values as stored)."""
        run = replace(run, run_id=run.run_id or uuid.uuid4().hex, created_at=run.created_at or utcnow(),
                      target=self.checkpoints.canonical_repo_id(run.target),
                      drafter=self._current_drafter_id(run.drafter))
        with self.core.session() as session:
            existing = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == run.run_id))
            if existing is not None:
                return run_record(existing)
            row = BenchmarkRun(**run_values(run))
            row.set_results.extend(RunSetResult(**set_values(result)) for result in run.per_set)
            row.prediction = prediction_row(run.prediction) if run.prediction is not None else None
            session.add(row)
            session.flush()
            return run_record(row)

    def _current_drafter_id(self, drafter: str | None) -> str | None:
        """The id the registry records this drafter under now (renames followed); anything else (a local folder, a
        drafter not in the registry) as given."""
        record = self.reads.get_drafter(drafter) if drafter is not None else None
        return record.repo_id if record is not None else drafter

    def get_run(self, run_id: str) -> Run | None:
        with self.core.session() as session:
            row = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == run_id))
            return run_record(row) if row else None

    def list_runs(
        self,
        *,
        target: str | None = None,
        drafter: str | None = None,
        status: str | None = None,
        engine: str | None = None,
        hardware: str | None = None,
        method: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        before_run_id: str | None = None,
    ) -> list[Run]:
        """Newest first; a drafter's or target's old id (before a rename) finds its runs too. `offset` skips that many;
        `before_run_id`: only the runs after that one in this order (the API's keyset pages; NotFound when no run has
        that id)."""
        return self._runs(target=self.checkpoints.canonical_repo_id(target) if target is not None else None,
                          drafter=self._current_drafter_id(drafter), status=status, engine=engine, hardware=hardware,
                          method=method, limit=limit, offset=offset, before_run_id=before_run_id)

    def _runs(self, *, target: str | None, drafter: str | None, status: str | None = None,
              engine: str | None = None, hardware: str | None = None, method: str | None = None,
              limit: int | None = None, offset: int = 0, before_run_id: str | None = None) -> list[Run]:
        """list_runs for ids already as the registry records them (no rename lookups)."""
        with self.core.session() as session:
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
            if before_run_id is not None:
                last = session.execute(select(BenchmarkRun.created_at, BenchmarkRun.id)
                                       .where(BenchmarkRun.run_id == before_run_id)).first()
                if last is None:
                    raise NotFound(f"no run {before_run_id}")
                query = query.where(or_(BenchmarkRun.created_at < last.created_at,
                                        and_(BenchmarkRun.created_at == last.created_at, BenchmarkRun.id < last.id)))
            if offset:
                query = query.offset(offset)
            if limit is not None:
                query = query.limit(limit)
            return [run_record(row) for row in session.scalars(query)]

    def regression_event(self, run: Run) -> EventSpec | None:
        """An `acceptance_regressed` event when τ fell against the previous comparable run of the same pair (the rule
        is registry.domain.regression's); `run` as record_run returned it."""
        if run.status != "ok" or run.tau is None or run.drafter is None:
            return None
        # The newest few runs of the series are enough: the comparison is with the latest comparable one. The run's
        # ids are as record_run stored them (current ids), so they are not looked up again.
        recent = self._runs(target=run.target, drafter=run.drafter, status="ok", engine=run.engine,
                            hardware=run.hardware, method=run.method, limit=20)
        found = regression(run, recent)
        if found is None:
            return None
        return EventSpec(type=found.type, subject=found.subject, dedupe_key=found.dedupe_key, payload=found.payload,
                         org=found.org)

    def set_predictions(self, predictions: Mapping[str, RunPrediction]) -> int:
        """Store each run's prediction (by run id) in its run_prediction row, replacing the one it had; returns how
        many runs changed. Unknown run ids are skipped."""
        changed = 0
        with self.core.session() as session:
            for row in session.scalars(select(BenchmarkRun).where(BenchmarkRun.run_id.in_(list(predictions)))):
                new = predictions[row.run_id]
                if row.prediction is None:
                    row.prediction = prediction_row(new)
                elif from_json(RunPrediction, row.prediction.prediction) != new:
                    row.prediction.model_version, row.prediction.prediction = new.model_version, to_json(new)
                else:
                    continue
                changed += 1
        return changed

    def recent_ok_runs_on_hardware(self, hardware: Collection[str | None], limit: int) -> list[Run]:
        """The `limit` most recent successful runs with a measured speed (baseline or speculative tok/s) on any of
        these hardware names (None: the runs that name none), newest first as list_runs orders them (created_at,
        then id): the sample the pricing model fits one run's constants from. Each name is one walk of the
        (hardware, created_at) index that stops after `limit` rows, so reading it costs the same with a hundred runs
        on the machine as with a hundred thousand."""
        measured = or_(and_(BenchmarkRun.baseline_tokens_per_s.is_not(None), BenchmarkRun.baseline_tokens_per_s != 0),
                       and_(BenchmarkRun.tokens_per_s.is_not(None), BenchmarkRun.tokens_per_s != 0))
        newest: list[tuple[datetime, int]] = []
        with self.core.session() as session:
            for name in dict.fromkeys(hardware):
                on = BenchmarkRun.hardware.is_(None) if name is None else BenchmarkRun.hardware == name
                query = (select(BenchmarkRun.created_at, BenchmarkRun.id)
                         .where(on, BenchmarkRun.status == "ok", measured)
                         .order_by(BenchmarkRun.hardware.desc(), BenchmarkRun.created_at.desc(), BenchmarkRun.id.desc())
                         .limit(limit))
                newest.extend((aware(created_at), row_id) for created_at, row_id in session.execute(query))
            # Only the `limit` newest of all the names are loaded whole (with their per-set results): one catalog GPU
            # group of four names read and built four times the rows it kept.
            chosen = [row_id for _, row_id in sorted(newest, reverse=True)[:limit]]
            rows = session.scalars(select(BenchmarkRun).options(selectinload(BenchmarkRun.set_results))
                                   .where(BenchmarkRun.id.in_(chosen))).all()
            by_id = {row.id: row for row in rows}
            return [run_record(by_id[row_id]) for row_id in chosen]

    def hardware_names(self) -> list[str]:
        """Every hardware name some stored run names (failed runs' included), in order."""
        with self.core.session() as session:
            return [name for (name,) in session.execute(_HARDWARE_NAMES)]
