"""What a reader compares to know whether the data moved, and what moved: the data version in parts, the runs
added since a version, and the newest event id that is safe to hand out (event_horizon.py).

Each read is one snapshot (SQLite WAL: one read transaction; PostgreSQL: REPEATABLE READ), so that a count and a
maximum read apart agree with each other: read in three snapshots, a run committed between them looked like a run
committed late below the newest id, whose answer is to drop every run body (bench/api.py, issue 31 item 3).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Select, func, select

from registry.domain.records import DataParts
from registry.store.event_horizon import EventHorizon
from registry.store.models import BenchmarkRun, Checkpoint, Compatibility, Drafter, Event, Job, SpeedupCurveRow


@dataclass(frozen=True)
class RunsAdded:
    """What one snapshot says about the runs: their count and newest row id, and the (target, drafter) pairs and
    number of the runs above a given row id."""

    count: int
    max_id: int
    added: int
    pairs: set[tuple[str, str | None]]


class DataVersion:
    """The data version of one read-only engine, and the event horizon of this process."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._events = EventHorizon()

    def parts(self) -> DataParts:
        """The data version, in parts (see DataParts), from one snapshot."""
        with self._one_snapshot() as connection:
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

    def runs_after(self, run_id: int) -> RunsAdded:
        """The runs above row id `run_id`, with the count and newest id of the same snapshot: when the count grew
        by exactly `added`, those runs are the whole change since a version whose newest id was `run_id`."""
        with self._one_snapshot() as connection:
            rows = connection.execute(select(BenchmarkRun.target, BenchmarkRun.drafter)
                                      .where(BenchmarkRun.id > run_id)).all()
            count = int(connection.execute(select(func.count(BenchmarkRun.id))).scalar() or 0)
            max_id = int(connection.execute(select(func.max(BenchmarkRun.id))).scalar() or 0)
        return RunsAdded(count, max_id, len(rows), {(target, drafter) for target, drafter in rows})

    def settled_event_id(self) -> int:
        """The newest event id no slower writer can still commit below (event_horizon.py)."""
        return self._events.settled_up_to(self._engine)

    @contextmanager
    def _one_snapshot(self) -> Iterator[Connection]:
        with self._engine.connect() as connection:
            if self._engine.dialect.name == "postgresql":
                connection = connection.execution_options(isolation_level="REPEATABLE READ")
            with connection.begin():
                yield connection
