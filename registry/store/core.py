"""The store's base: the engine, sessions and units of work every part of `Store` (see __init__.py) builds on."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from registry.errors import Failed
from registry.store.db import open_database, session_scope


def utcnow() -> datetime:
    return datetime.now(UTC)


def aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


Row = TypeVar("Row")


def insert_once(session: Session, model: type[Row], values: dict[str, Any], *, key: Sequence[str]) -> Row | None:
    """INSERT … ON CONFLICT (key) DO NOTHING (SQLite and PostgreSQL): the new row, or None when a row with that
    key exists, a concurrent writer's included. The database settles the race inside the one statement, so no
    IntegrityError is raised: catching one inside a unit of work would leave its session unusable (a failed flush
    rolls back the whole transaction, and every later call in the unit fails, its other writes lost)."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = (dialect.insert(model).values(**values)  # type: ignore[arg-type]
                 .on_conflict_do_nothing(index_elements=list(key)).returning(model))
    return session.scalars(statement).first()


class NotFound(Failed, LookupError):
    """A repo id the registry does not know (exit status 1)."""


class StoreCore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._factory = sessionmaker(engine, expire_on_commit=False)
        self._unit: ContextVar[Session | None] = ContextVar(f"unit-{id(self)}", default=None)

    @classmethod
    def open(cls, url: str) -> Self:
        return cls(open_database(url))

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on exit, or the enclosing unit of work's session when inside one.

        For registry/store and for tests only: product code outside registry/store must not use it (it calls the
        store's methods; tests/test_layers.py enforces this).
        """
        current = self._unit.get()
        if current is not None:
            _write_deferred(current)  # whatever runs next in the unit sees them
            yield current
            return
        with session_scope(self._factory) as session:
            yield session

    @contextmanager
    def unit(self) -> Iterator[None]:
        """Group several store calls into one transaction: all of them land, or none does."""
        if self._unit.get() is not None:
            yield
            return
        with session_scope(self._factory) as session:
            token = self._unit.set(session)
            try:
                yield
                _write_deferred(session)
            finally:
                self._unit.reset(token)

    def defer(self, write: Callable[[Session, list[Any]], None], item: Any) -> bool:
        """Inside a unit, queue `item` for one batched `write` of every item queued with it, run before the
        unit's next store call or at its end, so that a unit recording many rows sends one statement per table
        instead of one per row. False outside a unit (nothing queued: write it now)."""
        session = self._unit.get()
        if session is None:
            return False
        session.info.setdefault(_DEFERRED, {}).setdefault(write, []).append(item)
        return True


_DEFERRED = "deferred writes"


class DeferredWriteFailed(RuntimeError):
    """Rows queued in a unit (StoreCore.defer) could not be written: the unit rolls back. Its own type, because
    the store call that happened to write them may catch the database's errors for reasons of its own."""


def _write_deferred(session: Session) -> None:
    queued: dict[Callable[[Session, list[Any]], None], list[Any]] = session.info.pop(_DEFERRED, {})
    try:
        for write, items in queued.items():
            write(session, items)
    except Exception as exc:
        first_line = (str(exc).splitlines() or [""])[0]
        raise DeferredWriteFailed(f"queued rows not written: {type(exc).__name__}: {first_line}") from exc
