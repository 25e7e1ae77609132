"""The dashboard's way into the database: an engine whose connections refuse writes, the schema check, and
the plain rows its aggregates (aggregates.py, run_aggregates.py) hand back.

`open_read_only` makes reading only a property of the connection (a SQLite file opened `mode=ro`, which the
connection cannot switch off, plus `query_only`; PostgreSQL read-only transactions), so a dashboard bug cannot change the registry, and the dashboard also works under a PostgreSQL
role that may only SELECT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datetime import datetime

from sqlalchemy import Engine, Select, event, func, select
from sqlalchemy.exc import SQLAlchemyError

from registry.store.db import (
    DatabaseError,
    current_revision,
    head_revision,
    known_revision,
    make_engine,
    newer_database_message,
    parse_url,
)
from registry.redact import mask_url
from registry.store.core import aware
from registry.store.models import BenchmarkRun, Checkpoint, Compatibility, Drafter, Event, Job

FILL_COMMANDS = "`drafters catalog load`, `drafters watch --once` or `drafters verify …`"
# Column names and one tuple per row: plain values the dashboard turns into a DataFrame.
Rows = tuple[list[str], list[tuple[Any, ...]]]


class DatabaseMissing(DatabaseError):
    """No registry database at the configured URL yet; the message says which command creates one."""


def _read_only_sqlite(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA query_only=ON")
    cursor.close()


def _read_only_postgresql(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    cursor.close()
    dbapi_connection.commit()


def open_read_only(url: str) -> Engine:
    """An engine whose connections refuse writes: a SQLite file opened `mode=ro` (and `query_only`, should a
    file: URL name it), PostgreSQL sessions read-only. Never creates or upgrades a database."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if not database or database == ":memory:" or not Path(database).expanduser().is_file():
            raise DatabaseMissing(f"no registry database at {database or mask_url(url)}: run {FILL_COMMANDS} to "
                                  "create one")
    engine = make_engine(url, read_only=True)
    listener = _read_only_sqlite if engine.dialect.name == "sqlite" else _read_only_postgresql
    event.listen(engine, "connect", listener)
    return engine


def schema_problem(engine: Engine) -> str | None:
    """Why the dashboard cannot read this database, or None when its schema is current."""
    try:
        found = current_revision(engine)
    except SQLAlchemyError as exc:
        return f"cannot read the database: {' '.join(str(getattr(exc, 'orig', None) or exc).split())}"
    expected = head_revision()
    if found is None:
        return f"the database has no registry schema yet: run {FILL_COMMANDS}"
    if found != expected and not known_revision(found):
        return newer_database_message(found)
    if found != expected:
        return f"the database schema is at {found}, this dashboard needs {expected}: run `drafters db upgrade`"
    return None


def fetch_rows(engine: Engine, query: Select[Any]) -> Rows:
    with engine.connect() as connection:
        result = connection.execute(query)
        # Plain tuples: pandas reads Row objects column by column with one shared dtype, which can make it
        # coerce a text column to float ("job4").
        return list(result.keys()), [tuple(row) for row in result.all()]


def fetch_one(engine: Engine, query: Select[Any]) -> dict[str, Any] | None:
    with engine.connect() as connection:
        row = connection.execute(query).first()
    return None if row is None else dict(row._mapping)


def data_version(engine: Engine) -> tuple[tuple[object, ...], datetime | None]:
    """A cheap fingerprint of what the API shows, and the newest time any of it changed.

    Maxima and counts over the tables the API reads: a new event, run, verdict or job, or a job that starts or
    ends, changes it (the watcher records an event for every checkpoint or drafter change), so the API can
    answer a repeated request from its cache or with 304 Not Modified."""
    queries = (
        select(func.max(Event.id), func.max(Event.created_at)),
        # A count and a maximum in one SELECT make SQLite scan one index for both (11 ms at 100,000 runs, a
        # stall of the API's event loop every second under load); apart, the count scans the narrowest index
        # and the maximum is one index lookup (2.5 ms).
        select(func.count(BenchmarkRun.id)), select(func.max(BenchmarkRun.created_at)),
        select(func.count(Compatibility.id)), select(func.max(Compatibility.checked_at)),
        select(func.max(Job.id), func.count(Job.started_at), func.count(Job.finished_at), func.max(Job.started_at),
               func.max(Job.finished_at)),
        select(func.count(Checkpoint.id)),
        select(func.count(Drafter.id)),
    )
    with engine.connect() as connection:
        flat = tuple(value for query in queries for value in connection.execute(query).one())
    times = [aware(v) for v in flat if isinstance(v, datetime)]
    return tuple(v.isoformat() if isinstance(v, datetime) else v for v in flat), max(times, default=None)
