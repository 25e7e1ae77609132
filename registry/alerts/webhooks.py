"""Webhook subscriptions and their deliveries: each matching event reaches each subscription once.

Bodies are JSON that a Slack incoming webhook also accepts (`text`) plus the structured event, signed the
Standard Webhooks way when the subscription has a secret. A delivery is marked done only after a 2xx; the
`webhook-id` stays the same across retries so a receiver can drop a repeat after a crash between its 2xx and
our commit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets as random_secrets
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import func, select

from registry.store.models import Delivery, Event, Subscription
from registry.alerts.secrets import SecretBox
from registry.store import Store, aware, utcnow

log = logging.getLogger(__name__)

EVENT_TYPES = ("new_checkpoint", "base_upgrade", "weights_changed", "drafter_released", "lag_closed",
               "acceptance_regressed")
MAX_BACKOFF_S = 3600.0
# Past this age an undeliverable event is given up, with the last error kept.
GIVE_UP_AFTER = timedelta(days=3)


@dataclass(frozen=True)
class SubscriptionRecord:
    uid: str
    url: str
    event_types: tuple[str, ...]
    org: str | None
    family: str | None
    repo: str | None
    has_secret: bool
    active: bool
    created_at: datetime


@dataclass(frozen=True)
class DeliveryReport:
    attempted: int
    delivered: int
    failed: int
    pending: int


def _record(row: Subscription) -> SubscriptionRecord:
    return SubscriptionRecord(
        uid=row.uid,
        url=row.url,
        event_types=tuple(row.event_types),
        org=row.org,
        family=row.family,
        repo=row.repo,
        has_secret=row.has_secret,
        active=row.active,
        created_at=aware(row.created_at),  # type: ignore[arg-type]
    )


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of 32 random bytes, what every receiver library reads as is."""
    return "whsec_" + base64.b64encode(random_secrets.token_bytes(32)).decode()


def check_url(url: str) -> str:
    """The URL when httpx can post to it; otherwise ValueError with one line (the URL itself is not echoed: it
    may be a credential)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError("webhook URL must be http(s)://")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        raise ValueError("webhook URL is not a valid URL") from None
    if not parsed.host:
        raise ValueError("webhook URL has no host")
    return url


def check_secret(secret: str) -> str:
    """A `whsec_` secret must be base64 (what Standard Webhooks receivers decode); any other is used as raw bytes."""
    if secret.startswith("whsec_"):
        try:
            key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a whsec_ secret must be base64 after the prefix") from None
        if not key:
            raise ValueError("the whsec_ secret is empty")
    elif not secret:
        raise ValueError("the signing secret is empty")
    return secret


# Leading path segments made only of letters (`/services`, `/api/webhooks`) are shown; from the first other one
# (an id, a token) on, and always the last of several, they are masked: Slack, Discord and Teams put the
# credential in the path.
_PLAIN_SEGMENT = re.compile(r"[A-Za-z_-]{1,24}")


def mask_url(url: str) -> str:
    """A webhook URL for output: user:password@, token-like path segments, the query and fragment masked."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        return "(invalid URL)"
    netloc = parsed.host if ":" not in parsed.host else f"[{parsed.host}]"
    if parsed.port is not None:
        netloc += f":{parsed.port}"
    if parsed.userinfo:
        netloc = "***@" + netloc
    segments = [seg for seg in parsed.path.split("/") if seg]
    shown: list[str] = []
    keeping = True
    for index, segment in enumerate(segments):
        last_of_several = index == len(segments) - 1 and len(segments) > 1
        keeping = keeping and bool(_PLAIN_SEGMENT.fullmatch(segment)) and not last_of_several
        shown.append(segment if keeping else "***")
    path = "/" + "/".join(shown) if shown else "/"
    return f"{parsed.scheme}://{netloc}{path}" + ("?***" if parsed.query else "")


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
) -> SubscriptionRecord:
    check_url(url)
    if secret is not None:
        check_secret(secret)
    unknown = set(event_types) - set(EVENT_TYPES)
    if unknown:
        raise ValueError(f"unknown event types {sorted(unknown)}; known: {', '.join(EVENT_TYPES)}")
    uid = uuid.uuid4().hex
    if secret:
        secrets.put(uid, secret)
    with store.session() as session:
        last_event = session.scalar(select(func.max(Event.id))) or 0
        row = Subscription(
            uid=uid,
            url=url,
            event_types=list(event_types),
            org=org,
            family=family,
            repo=repo,
            has_secret=bool(secret),
            active=True,
            start_after_event_id=0 if include_past else last_event,
            created_at=utcnow(),
        )
        session.add(row)
        session.flush()
        return _record(row)


def subscriptions(store: Store) -> list[SubscriptionRecord]:
    with store.session() as session:
        return [_record(r) for r in session.scalars(select(Subscription).order_by(Subscription.id))]


def unsubscribe(store: Store, secrets: SecretBox, uid: str) -> bool:
    with store.session() as session:
        row = session.scalar(select(Subscription).where(Subscription.uid == uid))
        if row is None:
            return False
        row.active = False
    secrets.delete(uid)
    return True


def _matches(subscription: Subscription, event: Event) -> bool:
    if subscription.event_types and event.type not in subscription.event_types:
        return False
    if subscription.org and (event.org or "").lower() != subscription.org.lower():
        return False
    if subscription.family and (event.family or "").lower() != subscription.family.lower():
        return False
    return not (subscription.repo and event.subject != subscription.repo)


def _signing_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret.removeprefix("whsec_"))
    return secret.encode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks signature header value: `v1,<base64 HMAC-SHA256(id.timestamp.body)>`."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify(secret: str, headers: dict[str, str], body: bytes, *, tolerance_s: int = 300) -> bool:
    """What a receiver checks; used by tests and by anyone embedding a receiver in Python."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        message_id, timestamp = lowered["webhook-id"], int(lowered["webhook-timestamp"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    expected = sign(secret, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in lowered.get("webhook-signature", "").split())


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def slack_text(text: str) -> str:
    """Text Slack shows literally: control characters out, and &, <, > escaped so that `<!channel>` or
    `<https://…|click>` in a Hub config cannot ping a channel or make a link."""
    text = _CONTROL.sub(" ", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def event_body(event: Event) -> dict[str, Any]:
    payload = dict(event.payload)
    return {
        "text": slack_text(f"[{event.type}] {payload.get('message', event.subject)}"),
        "event": {
            "id": event.id,
            "type": event.type,
            "subject": event.subject,
            "org": event.org,
            "family": event.family,
            "created_at": aware(event.created_at).isoformat(),  # type: ignore[union-attr]
            "payload": payload,
        },
    }


def _plan(store: Store) -> None:
    """Create one pending delivery per (subscription, matching event); rerunning adds nothing."""
    now = utcnow()
    with store.session() as session:
        for subscription in session.scalars(select(Subscription).where(Subscription.active.is_(True))):
            planned = set(session.scalars(select(Delivery.event_id).where(Delivery.subscription_id == subscription.id)))
            events = session.scalars(select(Event).where(Event.id > subscription.start_after_event_id).order_by(Event.id))
            for event in events:
                if event.id not in planned and _matches(subscription, event):
                    session.add(
                        Delivery(subscription_id=subscription.id, event_id=event.id, status="pending", attempts=0,
                                 next_attempt_at=now)
                    )


def deliver_pending(store: Store, secrets: SecretBox, *, client: httpx.Client | None = None,
                    limit: int = 200) -> DeliveryReport:
    _plan(store)
    own_client = client is None
    client = client or httpx.Client(timeout=10.0)
    attempted = delivered = failed = 0
    try:
        now = utcnow()
        with store.session() as session:
            due = list(
                session.execute(
                    select(Delivery.id, Subscription, Event)
                    .join(Subscription, Delivery.subscription_id == Subscription.id)
                    .join(Event, Delivery.event_id == Event.id)
                    .where(Delivery.status == "pending", Delivery.next_attempt_at <= now)
                    .order_by(Delivery.id)
                    .limit(limit)
                )
            )
            work = [(delivery_id, sub.uid, sub.url, sub.has_secret, event_body(event), event.created_at)
                    for delivery_id, sub, event in due]
        for delivery_id, uid, url, has_secret, body_value, event_created in work:
            attempted += 1
            body = json.dumps(body_value, sort_keys=True).encode()
            message_id = f"msg_{uid[:12]}_{body_value['event']['id']}"
            timestamp = int(time.time())
            headers = {"content-type": "application/json", "webhook-id": message_id,
                       "webhook-timestamp": str(timestamp)}
            error: str | None = None
            # Each delivery on its own: one subscription with a broken URL or secret fails alone, and is retried
            # with backoff like any other failure.
            try:
                secret = secrets.get(uid) if has_secret else None
                if secret:
                    headers["webhook-signature"] = sign(secret, message_id, timestamp, body)
                response = client.post(url, content=body, headers=headers)
                if not 200 <= response.status_code < 300:
                    error = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                # httpx's messages can carry the URL, which may be a credential.
                error = f"{exc.__class__.__name__}: {str(exc).replace(url, mask_url(url))}"
            except Exception as exc:  # noqa: BLE001 - a bad URL or secret must not stop the other deliveries
                log.warning("delivery %s to %s failed: %s", delivery_id, mask_url(url), exc.__class__.__name__)
                error = exc.__class__.__name__
            with store.session() as session:
                row = session.get(Delivery, delivery_id)
                row.attempts += 1
                if error is None:
                    row.status, row.delivered_at, row.last_error = "delivered", utcnow(), None
                    delivered += 1
                    continue
                row.last_error = error
                if utcnow() - aware(event_created) > GIVE_UP_AFTER:  # type: ignore[operator]
                    row.status = "failed"
                    failed += 1
                else:
                    row.next_attempt_at = utcnow() + timedelta(seconds=min(MAX_BACKOFF_S, 2.0 ** row.attempts))
    finally:
        if own_client:
            client.close()
    with store.session() as session:
        pending = session.scalar(select(func.count()).select_from(Delivery).where(Delivery.status == "pending")) or 0
    return DeliveryReport(attempted=attempted, delivered=delivered, failed=failed, pending=pending)
