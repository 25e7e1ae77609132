"""Webhook deliveries to a real receiver: signed, retried with backoff, each event once; the Atom feed."""

from __future__ import annotations

import json
from datetime import timedelta
from xml.etree import ElementTree as ET

import httpx
from sqlalchemy import update

from registry.alerts import webhooks as alerts
from registry.alerts.feed import ATOM, render_feed
from registry.store.models import Delivery
from drafters.api.server import push_endpoint
from registry.alerts.secrets import SecretBox
from registry.domain.records import EventSpec
from registry.store import Store, utcnow
from registry.watch.push import PushHint, repo_from_payload
from tests.support.receiver import Receiver


def _event(store: Store, n: int, type_: str = "drafter_released", org: str = "z-lab") -> None:
    store.events.record_event(
        EventSpec(type=type_, subject=f"{org}/model-{n}", dedupe_key=f"{type_}:{n}", payload={"message": f"m{n}"},
                  org=org, family="qwen")
    )


def _make_due(store: Store) -> None:
    with store.session() as session:
        session.execute(update(Delivery).values(next_attempt_at=utcnow() - timedelta(seconds=1)))


def test_failing_receiver_gets_each_alert_once_signed(store: Store, tmp_path) -> None:
    secrets = SecretBox(tmp_path / "secrets.json")
    secret = "whsec_" + "c2VjcmV0LWtleS1mb3ItdGVzdHM="
    with Receiver(failures_first=4) as receiver:
        sub = alerts.subscribe(store, secrets, receiver.url, event_types=("drafter_released",), secret=secret, allow_internal=True)
        for n in range(3):
            _event(store, n)
        _event(store, 99, type_="new_checkpoint")  # not subscribed
        with httpx.Client(timeout=5) as client:
            for _ in range(6):
                alerts.deliver_pending(store, secrets, client=client, allow_internal=True)
                _make_due(store)
            report = alerts.deliver_pending(store, secrets, client=client, allow_internal=True)
        assert report.pending == 0
        bodies = [r.json for r in receiver.received]
        assert sorted(b["event"]["subject"] for b in bodies) == ["z-lab/model-0", "z-lab/model-1", "z-lab/model-2"]
        assert all(b["text"].startswith("[drafter_released]") for b in bodies)
        for got in receiver.received:
            assert alerts.verify(secret, got.headers, got.body)
            assert not alerts.verify("whsec_d3Jvbmc=", got.headers, got.body)
        assert receiver.attempts == 4 + 3
    # the secret is not in the database
    with store.engine.connect() as connection:
        dump = json.dumps([list(r) for r in connection.exec_driver_sql("SELECT * FROM subscription")], default=str)
    assert "c2VjcmV0" not in dump and sub.has_secret


def test_subscription_filters_and_starts_now(store: Store, tmp_path) -> None:
    secrets = SecretBox(tmp_path / "s.json")
    _event(store, 1)  # before the subscription: not sent
    with Receiver() as receiver:
        alerts.subscribe(store, secrets, receiver.url, org="Qwen", allow_internal=True)
        _event(store, 2, org="z-lab")
        _event(store, 3, org="Qwen")
        alerts.deliver_pending(store, secrets, allow_internal=True)
        assert [r.json["event"]["subject"] for r in receiver.received] == ["Qwen/model-3"]
        alerts.deliver_pending(store, secrets, allow_internal=True)
        assert len(receiver.received) == 1


def test_bad_subscriptions_refused(store: Store, tmp_path) -> None:
    import pytest

    secrets = SecretBox(tmp_path / "s.json")
    with pytest.raises(ValueError, match="http"):
        alerts.subscribe(store, secrets, "ftp://x", allow_internal=True)
    with pytest.raises(ValueError, match="unknown event types"):
        alerts.subscribe(store, secrets, "http://127.0.0.1:1/x", event_types=("nope",), allow_internal=True)


def test_feed_entry_ids_are_stable(store: Store) -> None:
    _event(store, 1)
    first = ET.fromstring(render_feed(store.events.events()))
    _event(store, 2)
    second = ET.fromstring(render_feed(store.events.events()))
    ids_first = [e.findtext(f"{{{ATOM}}}id") for e in first.findall(f"{{{ATOM}}}entry")]
    ids_second = [e.findtext(f"{{{ATOM}}}id") for e in second.findall(f"{{{ATOM}}}entry")]
    assert len(ids_first) == 1 and ids_first[0] in ids_second and len(ids_second) == 2
    assert second.findall(f"{{{ATOM}}}entry")[0].findtext(f"{{{ATOM}}}summary") == "m2"


def test_push_endpoint_checks_secret() -> None:
    got: list[str] = []
    server = push_endpoint("s3cret", got.append).start()
    url = f"http://127.0.0.1:{server.port}/"
    payload = {"event": {"action": "update", "scope": "repo.content"},
               "repo": {"type": "model", "name": "z-lab/x", "private": False},
               "updatedRefs": [{"ref": "refs/heads/main", "oldSha": "0" * 40, "newSha": "1" * 40}]}
    try:
        assert httpx.post(url, json=payload, headers={"X-Webhook-Secret": "wrong"}).status_code == 401
        assert httpx.post(url, json=payload, headers={"X-Webhook-Secret": "s3cret"}).status_code == 202
        server.repos.join()
    finally:
        server.stop()
    assert got == [PushHint("z-lab/x")]  # no headSha in this payload
    assert repo_from_payload({"repo": {"type": "dataset", "name": "a/b"}}) is None
    assert repo_from_payload({"event": {"action": "move", "scope": "repo"},
                              "repo": {"type": "model", "name": "a/b", "private": False},
                              "movedTo": {"name": "c/d"}}) == "c/d"
