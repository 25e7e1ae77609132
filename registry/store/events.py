"""The event log: what the watcher and the verifier noticed, recorded once per dedupe key."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import func, select

from registry.domain.records import EventRecord, EventSpec
from registry.store.core import StoreCore, insert_once, utcnow
from registry.store.mappers import event_record
from registry.store.models import Event


class Events:
    """The event log: each change recorded once per dedupe key."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def record_event(self, spec: EventSpec) -> EventRecord | None:
        """Insert once per dedupe key; returns None when the event was already recorded (by a concurrent writer
        too: the insert skips a key that exists, so a unit that records several events loses none of the others)."""
        with self.core.session() as session:
            row = insert_once(session, Event, {
                "type": spec.type, "subject": spec.subject, "org": spec.org, "family": spec.family,
                "payload": spec.payload, "dedupe_key": spec.dedupe_key, "created_at": utcnow()}, key=["dedupe_key"])
            return event_record(row) if row is not None else None

    def last_event_id(self) -> int:
        """The newest event's id (0 when there is none): one probe of the primary key, not a read of the log."""
        with self.core.session() as session:
            return session.scalar(select(func.max(Event.id))) or 0

    def events(
        self,
        *,
        types: Iterable[str] | None = None,
        org: str | None = None,
        family: str | None = None,
        since: datetime | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> list[EventRecord]:
        with self.core.session() as session:
            query = select(Event).order_by(Event.id)
            if types:
                query = query.where(Event.type.in_(list(types)))
            if org:
                query = query.where(Event.org == org)
            if family:
                query = query.where(Event.family == family)
            if since:
                query = query.where(Event.created_at >= since)
            if after_id is not None:
                query = query.where(Event.id > after_id)
            if limit:
                query = query.limit(limit)
            return [event_record(r) for r in session.scalars(query)]
