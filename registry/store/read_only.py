"""The readers' way into the database: an engine whose connections refuse writes, the schema check, the plain
rows the aggregates (aggregates.py, run_aggregates.py) hand back, and the event watermark (event_horizon.py).

`open_read_only` makes reading only a property of the connection (a SQLite file opened `mode=ro`, which the
connection cannot switch off, plus `query_only`; PostgreSQL read-only transactions), so a dashboard or API bug
cannot change the registry, and both also work under a PostgreSQL role that may only SELECT.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Select, event, func, select, text
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
from registry.store.models import Event

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
