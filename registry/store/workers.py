"""Workers and what each can run: device, memory and engines, refreshed by a heartbeat. A worker that has not
beaten within `LIVE_S` is not live: queued jobs that fit no live worker are shown as such."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select

from registry.store import Store
from registry.store.core import aware, utcnow
from registry.store.models import WorkerRow

LIVE_S = 120.0


@dataclass(frozen=True)
class WorkerRecord:
    worker_id: str
    host: str
    device: str
    memory_bytes: int
    engines: tuple[str, ...]
    disk_budget_bytes: int | None
    started_at: datetime
    heartbeat_at: datetime


def register_worker(store: Store, worker_id: str, *, host: str, device: str, memory_bytes: int,
                    engines: tuple[str, ...], disk_budget_bytes: int | None) -> None:
    """State (or restate) a worker's capabilities; also its heartbeat."""
    now = utcnow()
    with store.session() as session:
        row = session.scalar(select(WorkerRow).where(WorkerRow.worker_id == worker_id))
        if row is None:
            row = WorkerRow(worker_id=worker_id, started_at=now)
            session.add(row)
        row.host, row.device, row.memory_bytes = host, device, memory_bytes
        row.engines, row.disk_budget_bytes, row.heartbeat_at = list(engines), disk_budget_bytes, now


def live_workers(store: Store, *, within_s: float = LIVE_S) -> list[WorkerRecord]:
    since = utcnow() - timedelta(seconds=within_s)
    with store.session() as session:
        return [
            WorkerRecord(row.worker_id, row.host, row.device, row.memory_bytes, tuple(row.engines),
                         row.disk_budget_bytes, aware(row.started_at), aware(row.heartbeat_at))
            for row in session.scalars(select(WorkerRow).where(WorkerRow.heartbeat_at >= since)
                                       .order_by(WorkerRow.worker_id))
        ]
