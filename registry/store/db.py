"""Engine creation, the one session helper, and schema upgrades run programmatically at start-up."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from urllib.parse import quote

from alembic import command
from alembic.config import Config
from alembic.util import CommandError
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from registry.errors import Failed
from registry.redact import mask_url, scrub


class DatabaseError(Failed, RuntimeError):
    """A database that cannot be opened or upgraded; the message is one line for the user (exit status 1)."""


def _one_line(error: object) -> str:
    return " ".join(str(error).split())


# Seconds a SQLite statement waits for another connection's lock before "database is locked"; a URL's own
# `?timeout=S` (a pysqlite parameter) sets another.
SQLITE_BUSY_TIMEOUT_S = 30.0


def _sqlite_pragmas(busy_timeout_s: float, *, read_only: bool = False):  # type: ignore[no-untyped-def]
    def on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        cursor = dbapi_connection.cursor()
        # WAL lets the dashboard read while the watcher and workers write; a read-only connection cannot switch a
        # file to it (the writers do).
        if not read_only:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.close()
    return on_connect


def _private_sqlite_file(path: Path) -> None:
    """The registry (and the WAL and shm files SQLite makes with the same mode) readable by its owner only."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        if path.stat().st_mode & 0o077 and path.stat().st_uid == os.getuid():
            path.chmod(0o600)
    except OSError:
        pass  # SQLite says what is wrong with the path when it opens it


def parse_url(url: str) -> URL:
    """The database URL as SQLAlchemy reads it; one line that does not echo it (it may hold a password) when it
    cannot be read."""
    try:
        return make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is no number (`u:p@ss@h:5432`)
        raise DatabaseError("bad database URL (expected sqlite:///PATH or postgresql+psycopg://…)") from None


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for `url`. `read_only` opens a SQLite file with `mode=ro`: the file is opened read-only, which no
    statement on the connection can undo (a `PRAGMA query_only=OFF` can); it never creates the file."""
    parsed = parse_url(url)
    try:
        if parsed.get_backend_name() == "sqlite":
            database = parsed.database
            plain_file = bool(database) and database != ":memory:" and not str(database).startswith("file:")
            if plain_file and read_only:
                # SQLite's URI form: `?` and `#` in the path are quoted, or they would start its query.
                uri_path = quote(str(Path(str(database)).expanduser().resolve()), safe="/")
                parsed = parsed.set(database=f"file:{uri_path}",
                                    query={**parsed.query, "mode": "ro", "uri": "true"})
            elif plain_file:
                _private_sqlite_file(Path(str(database)).expanduser())
            try:
                busy_timeout_s = float(str(parsed.query.get("timeout", SQLITE_BUSY_TIMEOUT_S)))
            except ValueError:
                raise DatabaseError(f"bad timeout in the database URL {mask_url(url)}: expected seconds") from None
            engine = create_engine(parsed, connect_args={"timeout": busy_timeout_s})
            event.listen(engine, "connect", _sqlite_pragmas(busy_timeout_s, read_only=read_only and plain_file))
        else:
            engine = create_engine(parsed, pool_pre_ping=True)
    except (NoSuchModuleError, ArgumentError, ImportError) as exc:
        raise DatabaseError(f"unsupported database URL {mask_url(url)}: {_one_line(exc)}") from None
    return engine


def _alembic_config(engine: Engine) -> Config:
    script_location = resources.files("migrations")
    config = Config()
    config.set_main_option("script_location", str(script_location))
    config.attributes["engine"] = engine
    return config


def head_revision() -> str:
    script = ScriptDirectory.from_config(_alembic_config(create_engine("sqlite://")))
    heads = script.get_heads()
    if len(heads) != 1:
        raise DatabaseError(f"migrations have {len(heads)} heads; expected one")
    return heads[0]


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    try:
        command.upgrade(_alembic_config(engine), revision)
    except OperationalError as exc:
        raise DatabaseError(f"cannot open the database: {_one_line(exc.orig)}") from None


def downgrade(engine: Engine, revision: str) -> None:
    command.downgrade(_alembic_config(engine), revision)


def open_database(url: str) -> Engine:
    """Connect and bring the schema to head: every command that opens the database goes through here."""
    engine = make_engine(url)
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        raise DatabaseError(f"cannot connect to {mask_url(url)}: {scrub(_one_line(exc.orig), url)}") from None
    current = current_revision(engine)
    if current != head_revision():
        if current is not None and not known_revision(current):
            raise DatabaseError(newer_database_message(current))
        upgrade(engine)
    return engine


def known_revision(revision: str) -> bool:
    script = ScriptDirectory.from_config(_alembic_config(create_engine("sqlite://")))
    try:
        return script.get_revision(revision) is not None
    except CommandError:  # alembic's "Can't locate revision": written by a newer install
        return False


def newer_database_message(revision: str) -> str:
    try:
        installed = package_version("drafter-registry")
    except PackageNotFoundError:
        installed = "unknown"
    return (f"database is newer than this install (revision {revision}; drafter-registry {installed} knows up to "
            f"{head_revision()}): install drafter-registry > {installed}, the release that wrote it")


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


@contextmanager
def scratch_database(admin_url: str, prefix: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the server at `admin_url` (for benchmarks), dropped on exit; yields
    its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class StatementCounter:
    """Counts the SQL statements an engine sends, the store's round trips (benchmarks and tests read it); every
    statement counts, one batched insert of many rows once."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *_args: object) -> None:
        self.count += 1
