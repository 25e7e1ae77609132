"""Two watchers on one PostgreSQL registry, started together: each org is listed once per polling interval.

The watchers poll in lockstep rounds, one round per interval: a barrier stands in for two hosts whose timers fire
at the same moment, and between rounds the test ages every cursor's `polled_at` by one interval instead of
sleeping through it. The fake Hub's request log says how often each org was listed in each round.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from registry.hub import HubClient
from registry.store.models import WatchCursor
from registry.store import Store
from registry.watch.poller import PollReport, Watcher
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
ROUNDS = 4  # the baseline poll (the slow one, every org read in full) and three incremental re-polls
INTERVAL_S = 300.0

# PostgreSQL only: the store several hosts share. Never skipped: the suite's server is always there.
pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)]


def listings_per_org(hub: FakeHub) -> Counter[str]:
    return Counter(r.query["author"][-1] for r in hub.requests if r.path == "/api/models" and "author" in r.query)


def age_cursors(store: Store, by: timedelta) -> None:
    with store.session() as session:
        session.execute(
            update(WatchCursor).where(WatchCursor.polled_at.is_not(None)).values(polled_at=WatchCursor.polled_at - by)
        )


def test_two_watchers_started_together_list_each_org_once_per_interval(database_url: str, tmp_path: Path) -> None:
    scenario = Scenario.standard()
    stores = [Store.open(database_url) for _ in range(2)]
    with FakeHub(scenario.state) as hub:
        watchers = [
            Watcher(store, HubClient(hub.url, None, tmp_path / f"cache-{i}", timeout=5.0, max_retries=2,
                                     backoff_base=0.01, backoff_cap=0.05), ORGS, owner=f"watcher-{i}")
            for i, store in enumerate(stores)
        ]
        start_round, end_round = threading.Barrier(3, timeout=120), threading.Barrier(3, timeout=120)
        reports: list[list[PollReport]] = [[], []]
        failures: list[BaseException] = []

        def run(index: int) -> None:
            for _ in range(ROUNDS):
                start_round.wait()
                try:
                    # What run_forever does on each tick of its interval.
                    reports[index].append(watchers[index].poll_once(skip_if_polled_within_s=INTERVAL_S / 2))
                except Exception as error:  # noqa: BLE001 - reported by the test below
                    failures.append(error)
                end_round.wait()

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
        for thread in threads:
            thread.start()
        per_round: list[Counter[str]] = []
        try:
            for _ in range(ROUNDS):
                hub.clear_requests()
                start_round.wait()
                end_round.wait()
                per_round.append(listings_per_org(hub))
                age_cursors(stores[0], timedelta(seconds=INTERVAL_S))
        finally:
            for thread in threads:
                thread.join(timeout=120)
            for store in stores:
                store.engine.dispose()
    assert not failures, failures
    once_each = Counter({org: 1 for org in ORGS})
    for number, counts in enumerate(per_round):
        assert counts == once_each, f"round {number}: orgs listed {dict(counts)}"
        polled = Counter(o.org for index in (0, 1) for o in reports[index][number].orgs if not o.skipped_lease)
        assert polled == once_each, f"round {number}: orgs polled {dict(polled)}"
        errors = [e for index in (0, 1) for e in reports[index][number].errors]
        assert errors == [], f"round {number}: {errors}"
