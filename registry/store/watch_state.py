"""The watcher's own state: per-org cursors and leases, per-repo failures and quarantine, service heartbeats."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update

from registry.domain.records import OrgLease, ServiceStatusRecord, WatchCursorRecord, WatchFailureRecord
from registry.store.core import StoreCore, aware, insert_once, utcnow
from registry.store.mappers import failure_record
from registry.store.models import Checkpoint, Drafter, ServiceStatus, WatchCursor, WatchFailure

# Most shas per query of recorded_heads: far under the bound-parameter limits of SQLite and PostgreSQL.
SHA_CHUNK = 5000


class WatchState:
    """The watcher's cursors, leases and failures, and every service's status row."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def record_watch_failure(self, repo_id: str, org: str, error: str, *, quarantine_after: int,
                             quarantine_s: float) -> WatchFailureRecord:
        """Count one more failure of the repo; at `quarantine_after` failures it is quarantined for
        `quarantine_s` seconds (doubling with each further failure)."""
        now = utcnow()
        with self.core.session() as session:
            row = session.scalar(select(WatchFailure).where(WatchFailure.repo_id == repo_id))
            if row is None:
                row = WatchFailure(repo_id=repo_id, org=org, failures=0, last_error="", failed_at=now)
                session.add(row)
            row.failures += 1
            row.last_error = error[:2000]
            row.failed_at = now
            if row.failures >= quarantine_after:
                factor = 2 ** min(row.failures - quarantine_after, 6)
                row.retry_at = now + timedelta(seconds=quarantine_s * factor)
            session.flush()
            return failure_record(row)

    def clear_watch_failure(self, repo_id: str) -> None:
        with self.core.session() as session:
            row = session.scalar(select(WatchFailure).where(WatchFailure.repo_id == repo_id))
            if row is not None:
                session.delete(row)

    def release_quarantine(self, repo_id: str | None = None) -> int:
        """End the quarantine of one repo (or all) now: the next poll tries it again. Returns how many."""
        now = utcnow()
        with self.core.session() as session:
            query = select(WatchFailure).where(WatchFailure.retry_at.is_not(None))
            if repo_id is not None:
                query = query.where(WatchFailure.repo_id == repo_id)
            rows = list(session.scalars(query))
            for row in rows:
                row.retry_at = now
            return len(rows)

    def org_failures(self, org: str) -> tuple[set[str], set[str]]:
        """The org's repos with failures on record, and of those the ones the watcher skips for now (quarantined):
        one query over the org's own rows."""
        now = utcnow()
        with self.core.session() as session:
            rows = session.execute(select(WatchFailure.repo_id, WatchFailure.retry_at).where(WatchFailure.org == org))
            failing, quarantined = set(), set()
            for repo_id, retry_at in rows:
                failing.add(repo_id)
                if retry_at is not None and aware(retry_at) > now:  # type: ignore[operator]
                    quarantined.add(repo_id)
            return quarantined, failing

    def watch_cursors(self) -> list[WatchCursorRecord]:
        with self.core.session() as session:
            return [WatchCursorRecord(org=r.org, polled_at=aware(r.polled_at), last_error=r.last_error,
                                      lease_owner=r.lease_owner)
                    for r in session.scalars(select(WatchCursor).order_by(WatchCursor.org))]

    def watch_failures(self) -> list[WatchFailureRecord]:
        with self.core.session() as session:
            return [failure_record(r) for r in session.scalars(select(WatchFailure).order_by(WatchFailure.repo_id))]

    def set_service_status(self, host: str, name: str, state: str, *, detail: str | None = None,
                           success: bool = False, error: str | None = None, restarted: bool = False) -> None:
        """Heartbeat of one part of `drafters up`: what it does now, and when it last succeeded or failed."""
        now = utcnow()
        with self.core.session() as session:
            key = (ServiceStatus.host == host, ServiceStatus.name == name)
            row = session.scalar(select(ServiceStatus).where(*key))
            if row is None:
                # Inserted once: a concurrent writer's row (its insert won) is updated instead.
                row = insert_once(session, ServiceStatus, {"host": host, "name": name, "state": state,
                                                           "heartbeat_at": now, "restarts": 0},
                                  key=["host", "name"]) or session.scalars(select(ServiceStatus).where(*key)).one()
            row.state, row.detail, row.heartbeat_at = state, detail, now
            if success:
                row.last_success_at = now
            if error is not None:
                row.last_error, row.last_error_at = error[:2000], now
            if restarted:
                row.restarts = (row.restarts or 0) + 1

    def service_statuses(self) -> list[ServiceStatusRecord]:
        with self.core.session() as session:
            rows = session.scalars(select(ServiceStatus).order_by(ServiceStatus.host, ServiceStatus.name))
            return [ServiceStatusRecord(host=r.host, name=r.name, state=r.state, detail=r.detail,
                                        heartbeat_at=aware(r.heartbeat_at), last_success_at=aware(r.last_success_at),
                                        last_error=r.last_error, last_error_at=aware(r.last_error_at),
                                        restarts=r.restarts or 0) for r in rows]

    # ---- org leases and cursors ---------------------------------------------------------------

    def acquire_org_lease(self, org: str, owner: str, lease_s: float, *,
                          skip_if_polled_within_s: float = 0.0) -> OrgLease:
        """Take the org's lease (two watchers never poll one org at once) unless it was polled within the given
        seconds; the lease is ours when it is free, already ours, or expired."""
        now = utcnow()
        free = (
            (WatchCursor.lease_owner.is_(None))
            | (WatchCursor.lease_owner == owner)
            | (WatchCursor.lease_expires_at < now)
        )
        if skip_if_polled_within_s > 0:
            free = free & (
                WatchCursor.polled_at.is_(None)
                | (WatchCursor.polled_at <= now - timedelta(seconds=skip_if_polled_within_s))
            )
        take = (update(WatchCursor).execution_options(synchronize_session=False)
                .where(WatchCursor.org == org, free)
                .values(lease_owner=owner, lease_expires_at=now + timedelta(seconds=lease_s))
                .returning(WatchCursor.last_modified, WatchCursor.polled_at))
        # The usual case is one statement: the lease taken and the cursor read back by the same UPDATE.
        with self.core.session() as session:
            taken = session.execute(take).first()
            if taken is not None:
                return OrgLease(won=True, cursor=aware(taken.last_modified), baseline=taken.polled_at is None)
            row = session.scalar(select(WatchCursor).where(WatchCursor.org == org))
            if row is not None:  # another watcher holds it (or polled it recently)
                return OrgLease(won=False, cursor=aware(row.last_modified), baseline=row.polled_at is None)
        # A new org: its cursor is created (by us or a concurrent watcher, whose row serves both), then taken.
        with self.core.session() as session:
            insert_once(session, WatchCursor, {"org": org}, key=["org"])
        with self.core.session() as session:
            taken = session.execute(take).first()
            if taken is not None:
                return OrgLease(won=True, cursor=aware(taken.last_modified), baseline=taken.polled_at is None)
            row = session.scalars(select(WatchCursor).where(WatchCursor.org == org)).one()
            return OrgLease(won=False, cursor=aware(row.last_modified), baseline=row.polled_at is None)

    def release_org_lease(self, org: str, owner: str, *, error: str | None, completed: bool) -> None:
        """Free the org's lease if `owner` still holds it, keeping the error; a completed poll stamps polled_at."""
        with self.core.session() as session:
            values: dict = {"lease_owner": None, "lease_expires_at": None, "last_error": error}
            if completed:
                values["polled_at"] = utcnow()
            session.execute(
                update(WatchCursor)
                .execution_options(synchronize_session=False)
                .where(WatchCursor.org == org, WatchCursor.lease_owner == owner)
                .values(**values)
            )

    def advance_cursor(self, org: str, last_modified: datetime) -> None:
        """Move the org's cursor forward to `last_modified`; it never moves back."""
        with self.core.session() as session:
            row = session.scalar(select(WatchCursor).where(WatchCursor.org == org))
            if row.last_modified is None or aware(row.last_modified) < last_modified:
                row.last_modified = last_modified

    def cursor(self, org: str) -> datetime | None:
        """The newest lastModified the org's polls have processed; None before its first poll."""
        with self.core.session() as session:
            return aware(session.scalar(select(WatchCursor.last_modified).where(WatchCursor.org == org)))

    def recorded_heads(self, shas: set[str]) -> set[str]:
        """Which of `shas` are the head of a recorded checkpoint or drafter, of any org (a listed repo with one may
        be that repo, moved)."""
        wanted, found = sorted(shas), set()
        with self.core.session() as session:
            for start in range(0, len(wanted), SHA_CHUNK):
                chunk = wanted[start:start + SHA_CHUNK]
                found |= set(session.scalars(select(Checkpoint.head_sha).where(Checkpoint.head_sha.in_(chunk))))
                found |= set(session.scalars(select(Drafter.head_sha).where(Drafter.head_sha.in_(chunk))))
        return {sha for sha in found if sha is not None}
