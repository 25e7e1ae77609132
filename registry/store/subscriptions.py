"""Webhook subscriptions and their deliveries (the HTTP side, signing and backoff live in registry/alerts)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from registry.domain.records import DueDelivery, EventRecord, SubscriptionRecord, SubscriptionSpec
from registry.store.core import StoreCore, utcnow
from registry.store.mappers import event_record, subscription_record
from registry.store.models import Delivery, Event, Subscription


def matches(subscription: SubscriptionRecord, event: EventRecord) -> bool:
    """Whether a subscription wants an event: its types, org and family (case-insensitive) and repo, when set."""
    if subscription.event_types and event.type not in subscription.event_types:
        return False
    if subscription.org and (event.org or "").lower() != subscription.org.lower():
        return False
    if subscription.family and (event.family or "").lower() != subscription.family.lower():
        return False
    return not (subscription.repo and event.subject != subscription.repo)


class Subscriptions:
    """Webhook subscriptions and the deliveries planned for them."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core

    def add_subscription(self, spec: SubscriptionSpec) -> SubscriptionRecord:
        """Store an active subscription; unless `include_past`, events recorded before it are never sent."""
        with self.core.session() as session:
            last_event = session.scalar(select(func.max(Event.id))) or 0
            row = Subscription(
                uid=spec.uid,
                url=spec.url,
                event_types=list(spec.event_types),
                org=spec.org,
                family=spec.family,
                repo=spec.repo,
                has_secret=spec.has_secret,
                active=True,
                start_after_event_id=0 if spec.include_past else last_event,
                created_at=utcnow(),
            )
            session.add(row)
            session.flush()
            return subscription_record(row)

    def subscriptions(self) -> list[SubscriptionRecord]:
        with self.core.session() as session:
            return [subscription_record(r) for r in session.scalars(select(Subscription).order_by(Subscription.id))]

    def remove_subscription(self, uid: str) -> SubscriptionRecord | None:
        """Deactivate a subscription (its deliveries stay, as history); None when the uid is unknown."""
        with self.core.session() as session:
            row = session.scalar(select(Subscription).where(Subscription.uid == uid))
            if row is None:
                return None
            row.active = False
            session.flush()
            return subscription_record(row)

    def plan_deliveries(self) -> int:
        """Create one pending delivery per (active subscription, matching event); rerunning adds nothing.
        Returns how many were created."""
        now = utcnow()
        created = 0
        with self.core.session() as session:
            for subscription in session.scalars(select(Subscription).where(Subscription.active.is_(True))):
                wanted = subscription_record(subscription)
                planned = set(session.scalars(select(Delivery.event_id).where(Delivery.subscription_id == subscription.id)))
                events = session.scalars(select(Event).where(Event.id > subscription.start_after_event_id).order_by(Event.id))
                for event in events:
                    if event.id not in planned and matches(wanted, event_record(event)):
                        session.add(
                            Delivery(subscription_id=subscription.id, event_id=event.id, status="pending", attempts=0,
                                     next_attempt_at=now)
                        )
                        created += 1
        return created

    def due_deliveries(self, now: datetime, limit: int) -> list[DueDelivery]:
        """Pending deliveries whose next attempt is due by `now`, oldest first."""
        with self.core.session() as session:
            rows = session.execute(
                select(Delivery.id, Delivery.attempts, Subscription, Event)
                .join(Subscription, Delivery.subscription_id == Subscription.id)
                .join(Event, Delivery.event_id == Event.id)
                .where(Delivery.status == "pending", Delivery.next_attempt_at <= now)
                .order_by(Delivery.id)
                .limit(limit)
            )
            return [DueDelivery(delivery_id=delivery_id, subscription=subscription_record(sub),
                                event=event_record(event), attempts=attempts)
                    for delivery_id, attempts, sub, event in rows]

    def record_delivery(self, delivery_id: int, *, ok: bool, status: int | None, error: str | None,
                        next_attempt_at: datetime | None) -> None:
        """Count one attempt. Delivered when `ok`; otherwise keep the error and retry at `next_attempt_at`, or,
        when that is None, give the delivery up (status "failed"). `status` is the HTTP status when there was
        a response; it is not stored (the error says it)."""
        with self.core.session() as session:
            row = session.get(Delivery, delivery_id)
            row.attempts += 1
            if ok:
                row.status, row.delivered_at, row.last_error = "delivered", utcnow(), None
                return
            row.last_error = error
            if next_attempt_at is None:
                row.status = "failed"
            else:
                row.next_attempt_at = next_attempt_at

    def pending_deliveries(self) -> int:
        with self.core.session() as session:
            return session.scalar(select(func.count()).select_from(Delivery).where(Delivery.status == "pending")) or 0
