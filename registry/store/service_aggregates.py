"""The service's state for the dashboard (read-only): what each part of `drafters up` last said, and the job queue."""

from __future__ import annotations

from sqlalchemy import Engine, func, select

from registry.store.models import Job, ServiceStatus
from registry.store.read_only import Rows, fetch_rows


class ServiceRows:
    """What each part of the service last said, and the job queue, over one read-only engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def service_rows(self) -> Rows:
        """What each part of `drafters up` on each host last said (watcher, worker, a server the canary checks, …)."""
        query = select(ServiceStatus.name, ServiceStatus.state, ServiceStatus.detail, ServiceStatus.heartbeat_at,
                       ServiceStatus.last_success_at, ServiceStatus.last_error, ServiceStatus.host,
                       ServiceStatus.last_error_at).order_by(ServiceStatus.name, ServiceStatus.host)
        return fetch_rows(self._engine, query)

    def job_state_rows(self) -> Rows:
        """How many verification jobs are in each state (queued, running, done, failed)."""
        return fetch_rows(self._engine,
                          select(Job.status, func.count().label("jobs")).group_by(Job.status).order_by(Job.status))
