"""The dashboard's way into the database: an engine whose connections refuse writes, the schema check, and
the plain rows its aggregates (aggregates.py, run_aggregates.py) hand back.

`open_read_only` makes reading only a property of the connection (a SQLite file opened `mode=ro`, which the
connection cannot switch off, plus `query_only`; PostgreSQL read-only transactions), so a dashboard bug cannot change the registry, and the dashboard also works under a PostgreSQL
role that may only SELECT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, Select, event, func, select, text
from sqlalchemy.exc import SQLAlchemyError

from registry.domain.records import DataParts
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
from registry.store.models import BenchmarkRun, Checkpoint, Compatibility, Drafter, Event, Job, SpeedupCurveRow

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


@contextmanager
def _one_snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection whose statements all read one snapshot (SQLite WAL: one read transaction; PostgreSQL:
    REPEATABLE READ), so that a count and a maximum read apart agree with each other."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            yield connection


def data_parts(engine: Engine) -> DataParts:
    """The data version, in parts (see DataParts), from one snapshot."""
    with _one_snapshot(engine) as connection:
        def one(query: Select[Any]) -> tuple[object, ...]:
            row = connection.execute(query).one()
            return tuple(v.isoformat() if isinstance(v, datetime) else v for v in row)
        # A count and a maximum in one SELECT make SQLite scan one index for both (11 ms at 100,000 runs, a
        # stall of the API's event loop every second under load); apart, the count scans the narrowest index
        # and the maximum is one index lookup.
        return DataParts(
            runs=one(select(func.count(BenchmarkRun.id))) + one(select(func.max(BenchmarkRun.id))),
            events=one(select(func.max(Event.id), func.count(Event.id))),
            verdicts=one(select(func.count(Compatibility.id))) + one(select(func.max(Compatibility.checked_at))),
            jobs=one(select(func.max(Job.id), func.count(Job.started_at), func.count(Job.finished_at))),
            catalog=one(select(func.count(Checkpoint.id))) + one(select(func.count(Drafter.id)))
            + one(select(func.max(SpeedupCurveRow.id))),
        )


@dataclass(frozen=True)
class RunsAdded:
    """What one snapshot says about the runs: their count and newest row id, and the (target, drafter) pairs and
    number of the runs above a given row id."""

    count: int
    max_id: int
    added: int
    pairs: set[tuple[str, str | None]]


def runs_after(engine: Engine, run_id: int) -> RunsAdded:
    """The runs above row id `run_id`, with the count and newest id of the same snapshot: when the count grew by
    exactly `added`, those runs are the whole change since a version whose newest id was `run_id`."""
    with _one_snapshot(engine) as connection:
        rows = connection.execute(select(BenchmarkRun.target, BenchmarkRun.drafter)
                                  .where(BenchmarkRun.id > run_id)).all()
        count = int(connection.execute(select(func.count(BenchmarkRun.id))).scalar() or 0)
        max_id = int(connection.execute(select(func.max(BenchmarkRun.id))).scalar() or 0)
    return RunsAdded(count, max_id, len(rows), {(target, drafter) for target, drafter in rows})


@dataclass(frozen=True)
class EventWatermark:
    """The newest event id one snapshot saw, and (PostgreSQL) which transactions that snapshot could not see yet."""

    max_id: int
    snapshot_xmax: int | None  # PostgreSQL: every transaction id below it had started when the snapshot was taken


def event_watermark(engine: Engine) -> EventWatermark:
    """The newest visible event id and, on PostgreSQL, the snapshot's xmax, in one statement (one snapshot)."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            row = connection.execute(text(
                "SELECT max(id), pg_snapshot_xmax(pg_current_snapshot())::text::bigint FROM event")).one()
            return EventWatermark(int(row[0] or 0), int(row[1]))
        return EventWatermark(int(connection.execute(select(func.max(Event.id))).scalar() or 0), None)


def oldest_running_transaction(engine: Engine) -> int | None:
    """PostgreSQL: the xmin of a fresh snapshot (every transaction id below it has committed or aborted); None
    elsewhere."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")).scalar())
