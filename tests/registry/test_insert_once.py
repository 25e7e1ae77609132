"""Insert-once writes raced by a second writer on the same key, inside a unit of work: the second writer's row
stands, the unit's own write of that key does nothing, and the unit's other writes all land (issue 31: a swallowed
IntegrityError without a savepoint left the unit's session unusable, and its other event was lost)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event, func, select

from registry.domain.plan import WorkerCapability
from registry.domain.records import EventSpec
from registry.store import Store
from registry.store.models import Event, Job, ServiceStatus, WorkerRow


@contextmanager
def raced(store: Store, table: str, rival: Callable[[], None]) -> Iterator[list[str]]:
    """Run `rival` (on its own connection, committed) the first time `store` is about to insert into `table`:
    after any check the writer made that the key is free, before its insert. Yields the statements it raced."""
    fired: list[str] = []

    def before(conn, cursor, statement: str, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        if not fired and statement.startswith(f"INSERT INTO {table} "):
            fired.append(statement)
            rival()

    event.listen(store.engine, "before_cursor_execute", before)
    try:
        yield fired
    finally:
        event.remove(store.engine, "before_cursor_execute", before)


def _count(store: Store, model: type, *where: object) -> int:
    with store.session() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where))  # type: ignore[no-any-return]


def _worker(worker_id: str, memory: int) -> WorkerCapability:
    return WorkerCapability(worker_id=worker_id, device="cpu", memory_bytes=memory, engines={"pytorch": "2"},
                            disk_budget_bytes=1)


WRITES: dict[str, tuple[str, Callable[[Store], object]]] = {
    "event": ("event", lambda s: s.events.record_event(EventSpec(type="t", subject="s", dedupe_key="raced"))),
    "job": ("job", lambda s: s.jobs.enqueue("verify", {"n": 1}, dedupe_key="raced")),
    "worker": ("worker", lambda s: s.workers.register_worker(_worker("raced", 8), host="h")),
    "service status": ("service_status", lambda s: s.watch_state.set_service_status("h", "raced", "running")),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_a_unit_whose_insert_once_write_loses_a_race_keeps_its_other_writes(
    store: Store, database_url: str, write: str
) -> None:
    table, do = WRITES[write]
    rival = Store.open(database_url)
    try:
        with raced(store, table, lambda: do(rival)) as fired:
            with store.unit():
                do(store)  # the rival wrote the same key first, between our check and our insert
                store.events.record_event(EventSpec(type="t", subject="s", dedupe_key="the unit's other event"))
    finally:
        rival.engine.dispose()
    assert fired, "the race was not run"
    assert _count(store, Event, Event.dedupe_key == "the unit's other event") == 1
    model, key = {"event": (Event, Event.dedupe_key), "job": (Job, Job.dedupe_key),
                  "worker": (WorkerRow, WorkerRow.worker_id),
                  "service status": (ServiceStatus, ServiceStatus.name)}[write]
    assert _count(store, model, key == "raced") == 1


def test_the_loser_of_a_registration_race_still_states_its_capabilities(store: Store, database_url: str) -> None:
    """A worker row inserted by a rival is updated with what this writer states, not left as the rival's."""
    rival = Store.open(database_url)
    try:
        with raced(store, "worker", lambda: rival.workers.register_worker(_worker("w", 8), host="rival")):
            store.workers.register_worker(_worker("w", 16), host="mine")
    finally:
        rival.engine.dispose()
    with store.session() as session:
        row = session.scalars(select(WorkerRow)).one()
        assert (row.host, row.memory_bytes) == ("mine", 16)
