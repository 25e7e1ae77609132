"""Hub webhooks naming repos of orgs this registry does not watch are ignored: through the push endpoint's HTTP
port into the watcher (registry.watch.poller.Watcher.poll_repo), against the HTTP fake Hub.

Probes guarded here (hardening round 4, item 4):
- a webhook naming `acme-labs/…` (an org not watched) records nothing, reads nothing from the Hub, and makes no
  `new_checkpoint` / `base_upgrade` event (so nothing is delivered to subscribers)
- the same webhook for a watched org's repo is read and recorded (the filter is not a blanket refusal)
- a move out of a watched org still keeps one record (tests/registry/test_watch_hub_events.py
  test_a_move_webhook_keeps_one_drafter_even_across_orgs: the hint's old id is watched)
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from drafters.api.server import ApiServer, push_endpoint
from registry.hub import HubClient
from registry.store import Store
from registry.watch.poller import Watcher
from tests.fakehub.server import FakeHub

SECRET = "push-secret-0123456789"
UNWATCHED = "acme-labs/Qwen3-8B-Support-FT"  # a finetune of Qwen/Qwen3-8B in the fake Hub
WATCHED = ["Qwen", "z-lab"]


@pytest.fixture
def endpoint(store: Store, hub: FakeHub, tmp_path: Path) -> Iterator[tuple[ApiServer, Watcher]]:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05, max_rate_limit_wait=2.0)
    watcher = Watcher(store, client, list(WATCHED))
    server = push_endpoint(
        SECRET, lambda hint: watcher.poll_repo(hint.repo_id, hint.head_sha, moved_from=hint.moved_from)).start()
    try:
        yield server, watcher
    finally:
        server.stop()


def deliver(server: ApiServer, repo_id: str) -> int:
    payload = {"event": {"action": "update", "scope": "repo.content"},
               "repo": {"type": "model", "name": repo_id, "private": False},
               "updatedRefs": [{"ref": "refs/heads/main", "oldSha": None, "newSha": None}],
               "webhook": {"id": "6540fa9e2d0c1c3f0b000001", "version": 3}}
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("POST", "/", json.dumps(payload).encode(),
                           {"X-Webhook-Secret": SECRET, "Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    server.repos.join()
    return response.status


def test_a_webhook_for_an_unwatched_org_records_and_announces_nothing(
    store: Store, hub: FakeHub, endpoint: tuple[ApiServer, Watcher]
) -> None:
    server, watcher = endpoint
    report = watcher.poll_once()
    assert not report.errors
    assert store.watch.recorded_repo(UNWATCHED) is None
    before = [e.id for e in store.events.events()]
    hub.clear_requests()

    assert deliver(server, UNWATCHED) == 202  # the caller learns nothing about what is watched
    assert store.watch.recorded_repo(UNWATCHED) is None
    assert [e.id for e in store.events.events()] == before
    assert not [r.path for r in hub.requests if UNWATCHED in r.path]


def test_the_same_webhook_is_read_once_its_org_is_watched(store: Store, hub: FakeHub,
                                                           endpoint: tuple[ApiServer, Watcher]) -> None:
    server, watcher = endpoint
    watcher.poll_once()
    watcher.orgs.append("acme-labs")
    before = len(store.events.events())
    assert deliver(server, UNWATCHED) == 202
    assert store.watch.recorded_repo(UNWATCHED) is not None
    assert len(store.events.events()) > before  # what the unwatched case must not announce
