"""The download ledger: every repo revision the service fetched itself, with its progress, size, time and last use.

Eviction reads only this ledger, so files the service did not download are never deleted. A revision is usable
for a measurement only once its row is `complete`: a download killed midway stays `downloading` (and resumes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from registry.store.core import StoreCore, aware, utcnow
from registry.store.models import Download

DOWNLOADING, COMPLETE, FAILED, EVICTED = "downloading", "complete", "failed", "evicted"


@dataclass(frozen=True)
class DownloadRecord:
    repo_id: str
    revision: str
    status: str
    path: str
    bytes_total: int | None
    bytes_done: int
    seconds: float | None
    error: str | None
    started_at: datetime
    finished_at: datetime | None
    last_used_at: datetime


def _record(row: Download) -> DownloadRecord:
    return DownloadRecord(row.repo_id, row.revision, row.status, row.path, row.bytes_total, row.bytes_done or 0,
                          row.seconds, row.error, aware(row.started_at), aware(row.finished_at),  # type: ignore[arg-type]
                          aware(row.last_used_at))  # type: ignore[arg-type]


class Downloads:
    """The download ledger's rows: start, progress, finish, touch, evict, and read them back."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def get_download(self, repo_id: str, revision: str) -> DownloadRecord | None:
        with self.core.session() as session:
            row = session.scalar(select(Download).where(Download.repo_id == repo_id, Download.revision == revision))
            return _record(row) if row else None

    def start_download(self, repo_id: str, revision: str, path: str, bytes_total: int | None) -> None:
        now = utcnow()
        with self.core.session() as session:
            row = session.scalar(select(Download).where(Download.repo_id == repo_id, Download.revision == revision))
            if row is None:
                row = Download(repo_id=repo_id, revision=revision, started_at=now, bytes_done=0)
                session.add(row)
            row.status, row.path, row.bytes_total, row.error = DOWNLOADING, path, bytes_total, None
            row.finished_at, row.last_used_at = None, now

    def progress(self, repo_id: str, revision: str, bytes_done: int) -> None:
        with self.core.session() as session:
            row = session.scalar(select(Download).where(Download.repo_id == repo_id, Download.revision == revision))
            if row is not None and row.status == DOWNLOADING:
                row.bytes_done = bytes_done

    def finish_download(self, repo_id: str, revision: str, *, bytes_done: int, seconds: float,
                        error: str | None = None) -> None:
        now = utcnow()
        with self.core.session() as session:
            row = session.scalar(select(Download).where(Download.repo_id == repo_id, Download.revision == revision))
            if row is None:
                return
            row.status = FAILED if error else COMPLETE
            row.bytes_done, row.seconds, row.error, row.finished_at, row.last_used_at = (
                bytes_done, seconds, error, now, now)

    def touch(self, repo_id: str, revision: str) -> None:
        with self.core.session() as session:
            row = session.scalar(select(Download).where(Download.repo_id == repo_id, Download.revision == revision))
            if row is not None:
                row.last_used_at = utcnow()

    def mark_evicted(self, repo_id: str, revision: str) -> None:
        with self.core.session() as session:
            row = session.scalar(select(Download).where(Download.repo_id == repo_id, Download.revision == revision))
            if row is not None:
                row.status, row.bytes_done = EVICTED, 0

    def list_downloads(self, *, status: str | None = None) -> list[DownloadRecord]:
        """Least recently used first."""
        with self.core.session() as session:
            query = select(Download).order_by(Download.last_used_at, Download.id)
            if status is not None:
                query = query.where(Download.status == status)
            return [_record(row) for row in session.scalars(query)]
