"""Workers and what each can run: device, memory, engines (with versions) and disk budget, refreshed by a
heartbeat. A worker that has not beaten within `LIVE_S` is not live: queued jobs that fit no live worker are shown
as such, and the dashboard plans against the live workers' capabilities."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from registry.domain.plan import WorkerCapability
from registry.store.core import StoreCore, insert_once, utcnow
from registry.store.models import WorkerRow

LIVE_S = 120.0


class Workers:
    """Workers' stated capabilities (their heartbeat) and the live ones."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def register_worker(self, worker: WorkerCapability, *, host: str) -> None:
        """State (or restate) a worker's capabilities; also its heartbeat. Two parts of one service may state the same
        worker at once (`drafters up`'s planner and worker): the row is inserted once (the loser's insert does
        nothing), then updated."""
        now = utcnow()
        values = {"host": host, "device": worker.device, "memory_bytes": worker.memory_bytes,
                  "engines": dict(worker.engines), "disk_budget_bytes": worker.disk_budget_bytes, "heartbeat_at": now,
                  "has_token": worker.has_token, "run_bytes_per_parameter": worker.run_bytes_per_parameter}
        with self.core.session() as session:
            row = session.scalar(select(WorkerRow).where(WorkerRow.worker_id == worker.worker_id))
            if row is None:
                row = insert_once(session, WorkerRow, {"worker_id": worker.worker_id, "started_at": now, **values},
                                  key=["worker_id"])
                if row is not None:
                    return
                row = session.scalars(select(WorkerRow).where(WorkerRow.worker_id == worker.worker_id)).one()
            for name, value in values.items():
                setattr(row, name, value)

    def live_workers(self, *, within_s: float = LIVE_S) -> list[WorkerCapability]:
        """The workers that beat within `within_s`, most memory first."""
        since = utcnow() - timedelta(seconds=within_s)
        with self.core.session() as session:
            return [
                WorkerCapability(worker_id=row.worker_id, device=row.device, memory_bytes=row.memory_bytes,
                                 engines=dict(row.engines), disk_budget_bytes=row.disk_budget_bytes or 0,
                                 has_token=bool(row.has_token), run_bytes_per_parameter=row.run_bytes_per_parameter)
                for row in session.scalars(select(WorkerRow).where(WorkerRow.heartbeat_at >= since)
                                           .order_by(WorkerRow.memory_bytes.desc(), WorkerRow.worker_id))
            ]
