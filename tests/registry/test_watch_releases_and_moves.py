"""Release days and moves against the fake Hub (issue 28 item 5).

- A staged release (created privately, made public later) is released the day it went public, also when its last
  private commit is newer than the cursor (the detailed listing shows it as a changed model, not an unseen one) and
  when the public flip arrives by webhook before any poll.
- A repo moved to another org is one record, announced once, also when the new org is polled before the old one.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from registry.hub import HubClient
from registry.store import Store
from registry.watch import units
from registry.watch.poller import Watcher
from registry.watch.push import hint_from_payload
from tests.fakehub.scenario import QWEN36_27B_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import target_files, utc

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
STAGED = "Qwen/Qwen3.7-27B"
CARD = {"library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}


def make_watcher(store: Store, hub: FakeHub, tmp_path: Path) -> Watcher:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05)
    return Watcher(store, client, ORGS)


def events(store: Store) -> list[tuple[str, str]]:
    return [(e.type, e.subject) for e in store.events.events()]


@pytest.fixture
def polled(store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path) -> Watcher:
    """Day 0, then Qwen3.5-27B and its drafter: a cursor well after 2026-02-01, and a line a successor extends."""
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    scenario.advance("qwen35_27b_appears")
    scenario.advance("drafter_for_qwen35_27b")
    assert not watcher.poll_once().errors
    return watcher


def stage(scenario: Scenario) -> None:
    """Created (privately) on 2026-02-01, last committed the next day."""
    scenario.state.add_repo(STAGED, created_at=utc(2026, 2, 1), date=utc(2026, 2, 2),
                            files=target_files(QWEN36_27B_CONFIG, weight_seed=3727, card_data=CARD),
                            pipeline_tag="text-generation", library_name="transformers", private=True)


def test_a_staged_release_committed_after_the_cursor_is_released_when_it_went_public(
    store: Store, scenario: Scenario, polled: Watcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage(scenario)
    cursor = store.watch_state.cursor("Qwen")
    assert cursor is not None and cursor > utc(2026, 2, 1)
    # Still private, a last commit newer than the cursor: the listing shows it changed, created long before.
    scenario.state.commit(STAGED, {"generation_config.json": b"{}\n"}, title="Add generation config",
                          date=cursor + timedelta(days=2))
    flipped = cursor + timedelta(days=3, hours=4)
    monkeypatch.setattr(units, "utcnow", lambda: flipped)  # the watcher's clock: the day it saw it public
    scenario.state.set_private(STAGED, False)
    assert not polled.poll_once().errors
    checkpoint = store.reads.get_checkpoint(STAGED)
    assert checkpoint.released == flipped.date() and checkpoint.created_at_hub == utc(2026, 2, 1)
    assert ("new_checkpoint", STAGED) in events(store)


def test_a_public_flip_by_webhook_releases_a_staged_repo_that_day(
    store: Store, scenario: Scenario, polled: Watcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage(scenario)
    flipped = utc(2026, 4, 10, 9)
    monkeypatch.setattr(units, "utcnow", lambda: flipped)
    repo = scenario.state.set_private(STAGED, False)
    # The Hub's webhook (version 3) for the visibility change: scope repo.config, updatedConfig.private false.
    hint = hint_from_payload({
        "event": {"action": "update", "scope": "repo.config"},
        "repo": {"type": "model", "name": STAGED, "id": "6650c0ffee", "private": False, "headSha": repo.sha},
        "updatedConfig": {"private": False}, "webhook": {"id": "w1", "version": 3},
    })
    assert hint is not None and hint.made_public
    polled.poll_repo(hint.repo_id, hint.head_sha, moved_from=hint.moved_from, made_public=hint.made_public)
    assert store.reads.get_checkpoint(STAGED).released == flipped.date()
    assert not polled.poll_once().errors  # the poll after it agrees, and adds no second release
    assert store.reads.get_checkpoint(STAGED).released == flipped.date()
    assert events(store).count(("new_checkpoint", STAGED)) == 1


def test_a_repo_moved_into_an_org_polled_first_is_followed_not_announced_again(
    store: Store, scenario: Scenario, polled: Watcher
) -> None:
    drafter, checkpoint = "z-lab/Qwen3-8B-DFlash-b16", "acme-labs/Qwen3-8B-Support-FT"
    moved_drafter, moved_checkpoint = "Qwen/Qwen3-8B-DFlash-b16", "Qwen/Qwen3-8B-Support-FT"
    before = (store.reads.get_drafter(drafter), store.reads.get_checkpoint(checkpoint))
    history = [r.sha for r in store.reads.drafter_revisions(drafter)]
    count = len(store.events.events())
    # Qwen is polled before z-lab and acme-labs: it lists the moved repos before their old orgs miss them.
    scenario.state.rename(drafter, moved_drafter)
    scenario.state.rename(checkpoint, moved_checkpoint)
    assert not polled.poll_once().errors
    assert events(store)[count:] == []  # no second drafter_released, no new_checkpoint
    assert store.reads.get_drafter(moved_drafter).id == before[0].id
    assert store.reads.get_drafter(drafter).repo_id == moved_drafter  # the old id is an alias
    assert [r.sha for r in store.reads.drafter_revisions(moved_drafter)] == history
    assert store.reads.get_checkpoint(moved_checkpoint).id == before[1].id
    assert [d.repo_id for d in store.reads.drafters() if d.repo_id.endswith("Qwen3-8B-DFlash-b16")] == [moved_drafter]
    assert not polled.poll_once().errors and events(store)[count:] == []
