"""The job queue: claim with a lease, keep it alive with heartbeats, retry jobs whose worker died.

On PostgreSQL a claim is `SELECT … FOR UPDATE SKIP LOCKED`, so any number of workers on any number of hosts
never take one job twice. SQLite has one writer at a time; a conditional UPDATE gives the same guarantee there.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, true, update

from registry.domain.records import JobRecord
from registry.store.core import StoreCore, insert_once, utcnow
from registry.store.mappers import job_record
from registry.store.models import Job

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"


def _claimable(now: datetime):  # type: ignore[no-untyped-def]
    return or_(Job.status == QUEUED, and_(Job.status == RUNNING, Job.lease_expires_at < now))


def _fits(memory_bytes: int | None, engines: tuple[str, ...] | None):  # type: ignore[no-untyped-def]
    """The capability in the claim: a job that needs more memory, or an engine this worker lacks, is never taken."""
    conditions = []
    if memory_bytes is not None:
        conditions.append(or_(Job.memory_bytes.is_(None), Job.memory_bytes <= memory_bytes))
    if engines is not None:
        conditions.append(or_(Job.engine.is_(None), Job.engine.in_(engines)))
    return and_(*conditions) if conditions else true()


class Jobs:
    """The job queue: enqueue, claim what fits a worker, heartbeat, finish or fail, and read jobs back."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def enqueue(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        dedupe_key: str | None = None,
        max_attempts: int = 3,
        num_gpus: int = 0,
        memory_bytes: int | None = None,
        engine: str | None = None,
    ) -> JobRecord | None:
        """Queue a job; with a dedupe key a second enqueue of the same work returns None (a concurrent one too: the
        insert skips a key that exists, so an enqueue inside a unit of work never fails the unit)."""
        values = {"kind": kind, "payload": payload, "status": QUEUED, "attempts": 0, "max_attempts": max_attempts,
                  "num_gpus": num_gpus, "dedupe_key": dedupe_key, "created_at": utcnow(), "memory_bytes": memory_bytes,
                  "engine": engine}
        with self.core.session() as session:
            if dedupe_key is None:
                row = Job(**values)
                session.add(row)
                session.flush()
                return job_record(row)
            inserted = insert_once(session, Job, values, key=["dedupe_key"])
            return job_record(inserted) if inserted is not None else None

    def fail_exhausted(self) -> int:
        """Jobs whose lease ran out after their last allowed attempt are failed, keeping the reason."""
        now = utcnow()
        with self.core.session() as session:
            result = session.execute(
                update(Job)
                    .execution_options(synchronize_session=False)
                .where(Job.status == RUNNING, Job.lease_expires_at < now, Job.attempts >= Job.max_attempts)
                .values(
                    status=FAILED,
                    finished_at=now,
                    error="worker lost (lease expired) on the last allowed attempt",
                    lease_owner=None,
                )
            )
            return result.rowcount or 0

    def claim(self, worker_id: str, *, lease_s: float = 60.0, kinds: tuple[str, ...] = ("verify",),
              memory_bytes: int | None = None, engines: tuple[str, ...] | None = None) -> JobRecord | None:
        """Take the oldest claimable job that fits this worker (`memory_bytes` of device memory, `engines`; None: no
        limit): queued, or running with an expired lease (its worker died)."""
        self.fail_exhausted()
        now = utcnow()
        with self.core.session() as session:
            query = (
                select(Job)
                .where(_claimable(now), Job.kind.in_(kinds), Job.attempts < Job.max_attempts,
                       _fits(memory_bytes, engines))
                .order_by(Job.id)
                .limit(1)
            )
            if session.bind is not None and session.bind.dialect.name == "postgresql":
                row = session.scalar(query.with_for_update(skip_locked=True))
                if row is None:
                    return None
            else:
                candidate = session.scalar(query)
                if candidate is None:
                    return None
                # Only one writer wins this conditional update; the loser sees rowcount 0 and retries later.
                won = session.execute(
                    update(Job)
                    .execution_options(synchronize_session=False)
                    .where(Job.id == candidate.id, _claimable(now), Job.attempts == candidate.attempts)
                    .values(lease_owner=worker_id)
                ).rowcount
                if not won:
                    return None
                row = candidate
            lost_before = row.status == RUNNING
            row.status = RUNNING
            row.attempts += 1
            row.lease_owner = worker_id
            row.lease_expires_at = now + timedelta(seconds=lease_s)
            row.heartbeat_at = now
            row.started_at = now
            if lost_before:
                row.error = f"previous worker lost its lease (attempt {row.attempts - 1})"
            session.flush()
            return job_record(row)

    def release_own(self, worker_id: str) -> list[int]:
        """A worker starting under an id it keeps across restarts (`stable_owner`: this host and home) cannot be
        running anything yet, so the jobs still running under that id are its previous process's orphans: each goes
        back to the queue at once (kept in its place, the oldest claimed first), or fails when that was its last
        allowed attempt, rather than waiting out its lease while newer jobs go first. Returns their ids."""
        now = utcnow()
        with self.core.session() as session:
            rows = list(session.scalars(select(Job).where(Job.status == RUNNING, Job.lease_owner == worker_id)
                                        .order_by(Job.id).with_for_update()))
            for row in rows:
                row.lease_owner, row.lease_expires_at = None, None
                if row.attempts < row.max_attempts:
                    row.status = QUEUED
                    row.error = f"its worker restarted during attempt {row.attempts}; queued again"
                else:
                    row.status, row.finished_at = FAILED, now
                    row.error = "its worker restarted during the last allowed attempt"
            return [row.id for row in rows]

    def heartbeat(self, job_id: int, worker_id: str, *, lease_s: float = 60.0) -> bool:
        """Extend the lease; False when the job is no longer ours (it was reclaimed after we stalled)."""
        now = utcnow()
        with self.core.session() as session:
            result = session.execute(
                update(Job)
                    .execution_options(synchronize_session=False)
                .where(Job.id == job_id, Job.lease_owner == worker_id, Job.status == RUNNING)
                .values(heartbeat_at=now, lease_expires_at=now + timedelta(seconds=lease_s))
            )
            return bool(result.rowcount)

    def finish(self, job_id: int, worker_id: str, *, run_id: str | None) -> bool:
        now = utcnow()
        with self.core.session() as session:
            result = session.execute(
                update(Job)
                    .execution_options(synchronize_session=False)
                .where(Job.id == job_id, Job.lease_owner == worker_id, Job.status == RUNNING)
                .values(status=DONE, run_id=run_id, finished_at=now, lease_owner=None, lease_expires_at=None)
            )
            return bool(result.rowcount)

    def fail(self, job_id: int, worker_id: str, *, error: str, retry: bool, run_id: str | None = None) -> bool:
        """Record a failure; a retryable one goes back to the queue while attempts remain."""
        now = utcnow()
        with self.core.session() as session:
            # Locked, so a claim of this job (its lease ran out meanwhile) cannot land between the check and the write.
            row = session.get(Job, job_id, with_for_update=True)
            if row is None or row.lease_owner != worker_id or row.status != RUNNING:
                return False
            row.error = error
            row.run_id = run_id
            row.lease_owner, row.lease_expires_at = None, None
            if retry and row.attempts < row.max_attempts:
                row.status = QUEUED
            else:
                row.status, row.finished_at = FAILED, now
            return True

    def get_job(self, job_id: int) -> JobRecord | None:
        with self.core.session() as session:
            row = session.get(Job, job_id)
            return job_record(row) if row else None

    def list_jobs(self, *, status: str | None = None, limit: int | None = None) -> list[JobRecord]:
        with self.core.session() as session:
            query = select(Job).order_by(Job.id)
            if status is not None:
                query = query.where(Job.status == status)
            if limit is not None:
                query = query.limit(limit)
            return [job_record(row) for row in session.scalars(query)]
