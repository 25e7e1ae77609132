"""Webhook subscriptions and their deliveries: each matching event reaches each subscription once.

Bodies are JSON that a Slack incoming webhook also accepts (`text`) plus the structured event, signed the
Standard Webhooks way when the subscription has a secret. A delivery is marked done only after a 2xx; the
`webhook-id` stays the same across retries so a receiver can drop a repeat after a crash between its 2xx and
our commit. The rows live in the store (store/subscriptions.py); this module decides, posts and signs.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx

from registry.alerts.egress import delivery_client
from registry.alerts.secrets import SecretBox
# Re-exported (noqa F401): the CLI and receivers use new_secret, check_*, mask_webhook_url and verify from here.
from registry.alerts.signing import (  # noqa: F401
    check_secret,
    check_target,
    check_url,
    mask_webhook_url,
    new_secret,
    sign,
    slack_text,
    verify,
)
from registry.domain.records import EventRecord, SubscriptionRecord, SubscriptionSpec
from registry.store import Store, utcnow

log = logging.getLogger(__name__)

EVENT_TYPES = ("new_checkpoint", "base_upgrade", "weights_changed", "drafter_released", "drafter_gone",
               "lag_closed", "acceptance_regressed", "speculation_not_engaged")
MAX_BACKOFF_S = 3600.0
# Past this age an undeliverable event is given up, with the last error kept.
GIVE_UP_AFTER = timedelta(days=3)


@dataclass(frozen=True)
class DeliveryReport:
    attempted: int
    delivered: int
    failed: int
    pending: int


def check_subscription(url: str, *, secret: str | None, event_types: tuple[str, ...],
                       allow_internal: bool) -> str | None:
    """Everything about a subscription that can be wrong, checked before anything is written: ValueError with one
    line when it is refused, else a warning or None."""
    warning = check_target(url, allow_internal=allow_internal)
    if secret is not None:
        check_secret(secret)
    unknown = set(event_types) - set(EVENT_TYPES)
    if unknown:
        raise ValueError(f"unknown event types {sorted(unknown)}; known: {', '.join(EVENT_TYPES)}")
    return warning


def subscribe(
    store: Store,
    secrets: SecretBox,
    url: str,
    *,
    event_types: tuple[str, ...] = (),
    org: str | None = None,
    family: str | None = None,
    repo: str | None = None,
    secret: str | None = None,
    include_past: bool = False,
    allow_internal: bool = False,
) -> SubscriptionRecord:
    check_subscription(url, secret=secret, event_types=event_types, allow_internal=allow_internal)
    uid = uuid.uuid4().hex
    if secret:
        secrets.put(uid, secret)
    return store.subscriptions.add_subscription(
        SubscriptionSpec(uid=uid, url=url, event_types=tuple(event_types), org=org, family=family, repo=repo,
                         has_secret=bool(secret), include_past=include_past)
    )


def subscriptions(store: Store) -> list[SubscriptionRecord]:
    return store.subscriptions.subscriptions()


def unsubscribe(store: Store, secrets: SecretBox, uid: str) -> bool:
    if store.subscriptions.remove_subscription(uid) is None:
        return False
    secrets.delete(uid)
    return True


def event_body(event: EventRecord) -> dict[str, Any]:
    payload = dict(event.payload)
    return {
        "text": slack_text(f"[{event.type}] {payload.get('message', event.subject)}"),
        "event": {
            "id": event.id,
            "type": event.type,
            "subject": event.subject,
            "org": event.org,
            "family": event.family,
            "created_at": event.created_at.isoformat(),
            "payload": payload,
        },
    }


def _post(client: httpx.Client, secrets: SecretBox, subscription: SubscriptionRecord, delivery_id: int,
          body_value: dict[str, Any], allow_internal: bool) -> tuple[int | None, str | None]:
    """Post one delivery; (HTTP status or None, error or None when it got a 2xx)."""
    url = subscription.url
    body = json.dumps(body_value, sort_keys=True).encode()
    message_id = f"msg_{subscription.uid[:12]}_{body_value['event']['id']}"
    timestamp = int(time.time())
    headers = {"content-type": "application/json", "webhook-id": message_id, "webhook-timestamp": str(timestamp)}
    # Each delivery on its own: one subscription with a broken URL or secret fails alone, and is retried with
    # backoff like any other failure.
    try:
        # Again at each delivery: a name can resolve to an internal address later than it did at subscribe.
        check_target(url, allow_internal=allow_internal)
    except ValueError as exc:
        return None, f"refused: {exc}"
    try:
        if subscription.has_secret:
            secret = secrets.get(subscription.uid)
            if not secret:
                # Never sent unsigned: the receiver would drop it, or worse, accept it. It stays pending until the
                # secret is back (or the subscription is made again), then given up like any undeliverable event.
                return None, f"signing secret missing: {subscription.uid} is not in {secrets.path.name}; not sent unsigned"
            headers["webhook-signature"] = sign(secret, message_id, timestamp, body)
        response = client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        # httpx's messages can carry the URL, which may be a credential.
        return None, f"{exc.__class__.__name__}: {str(exc).replace(url, mask_webhook_url(url))}"
    except Exception as exc:  # noqa: BLE001 - a bad URL or secret must not stop the other deliveries
        log.warning("delivery %s to %s failed: %s", delivery_id, mask_webhook_url(url), exc.__class__.__name__)
        return None, exc.__class__.__name__
    if not 200 <= response.status_code < 300:
        return response.status_code, f"HTTP {response.status_code}"
    return response.status_code, None


def deliver_pending(store: Store, secrets: SecretBox, *, client: httpx.Client | None = None,
                    limit: int = 200, allow_internal: bool = False) -> DeliveryReport:
    store.subscriptions.plan_deliveries()
    own_client = client is None
    # The pre-check in _post refuses an internal answer early with a clear reason; the client checks the address
    # the socket actually connects to (a name can answer differently a moment later).
    client = client or delivery_client(allow_internal=allow_internal)
    attempted = delivered = failed = 0
    try:
        for due in store.subscriptions.due_deliveries(utcnow(), limit):
            attempted += 1
            status, error = _post(client, secrets, due.subscription, due.delivery_id, event_body(due.event),
                                  allow_internal)
            if error is None:
                store.subscriptions.record_delivery(due.delivery_id, ok=True, status=status, error=None,
                                                    next_attempt_at=None)
                delivered += 1
            elif utcnow() - due.event.created_at > GIVE_UP_AFTER:
                store.subscriptions.record_delivery(due.delivery_id, ok=False, status=status, error=error,
                                                    next_attempt_at=None)
                failed += 1
            else:
                retry_at = utcnow() + timedelta(seconds=min(MAX_BACKOFF_S, 2.0 ** (due.attempts + 1)))
                store.subscriptions.record_delivery(due.delivery_id, ok=False, status=status, error=error,
                                                    next_attempt_at=retry_at)
    finally:
        if own_client:
            client.close()
    return DeliveryReport(attempted=attempted, delivered=delivered, failed=failed,
                          pending=store.subscriptions.pending_deliveries())
