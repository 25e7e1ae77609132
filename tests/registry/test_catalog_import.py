"""The catalog's named drafter sha against the watcher: one revision per sha, changes judged on weights."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from registry.store.catalog_import import CATALOG_SHA
from registry.hub import HubClient
from registry.store import Store
from registry.watch.poller import Watcher
from tests.fakehub.scenario import ZLAB_QWEN3_8B_DFLASH_SHA, Scenario
from tests.fakehub.server import FakeHub
from tests.snapshot import snapshot

DRAFTER = "z-lab/Qwen3-8B-DFlash-b16"
UNNAMED = "z-lab/Qwen3-4B-DFlash-b16"  # in the catalog without a sha


def _watcher(store: Store, hub: FakeHub, tmp_path: Path) -> Watcher:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=2, backoff_base=0.01,
                       backoff_cap=0.05)
    return Watcher(store, client, ["Qwen", "z-lab", "meta-llama", "acme-labs"])


def _types(store: Store, subject: str) -> list[str]:
    return [e.type for e in store.events.events() if e.subject == subject]


def test_import_keeps_the_sha_the_catalog_names(store: Store) -> None:
    store.catalog.load_catalog()
    [named] = store.reads.drafter_revisions(DRAFTER)
    assert named.sha == ZLAB_QWEN3_8B_DFLASH_SHA and named.last_modified is None
    assert store.reads.get_drafter(DRAFTER).head_sha == ZLAB_QWEN3_8B_DFLASH_SHA
    assert [r.sha for r in store.reads.drafter_revisions(UNNAMED)] == [CATALOG_SHA]
    before = snapshot(store.engine)
    store.catalog.load_catalog()
    assert snapshot(store.engine) == before


def test_watcher_reading_the_named_sha_fills_it_in(store: Store, scenario: Scenario, hub: FakeHub,
                                                    tmp_path: Path) -> None:
    store.catalog.load_catalog()
    watcher = _watcher(store, hub, tmp_path)
    watcher.poll_repo(DRAFTER)  # not a baseline: a false alert would be recorded
    [revision] = store.reads.drafter_revisions(DRAFTER)
    assert revision.sha == ZLAB_QWEN3_8B_DFLASH_SHA
    assert revision.last_modified is not None and revision.weight_digest is not None
    assert "weights_changed" not in _types(store, DRAFTER)

    watcher.poll_once()
    after_watch = snapshot(store.engine)
    store.catalog.load_catalog()  # a restart re-imports: the Hub's read stays the head, nothing is added
    assert snapshot(store.engine) == after_watch
    assert len(store.reads.drafter_revisions(DRAFTER)) == 1

    # The filled-in digest is what a later in-place change is judged against.
    scenario.advance("weights_replaced")
    watcher.poll_once()
    assert _types(store, DRAFTER).count("weights_changed") == 1
    assert [r.sha for r in store.reads.drafter_revisions(DRAFTER)][0] == ZLAB_QWEN3_8B_DFLASH_SHA
    assert len(store.reads.drafter_revisions(DRAFTER)) == 2


def test_hub_past_the_named_sha_is_a_change(store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path) -> None:
    store.catalog.load_catalog()
    scenario.advance("weights_replaced")  # before the watcher ever looked
    _watcher(store, hub, tmp_path).poll_repo(DRAFTER)
    old, new = store.reads.drafter_revisions(DRAFTER)
    assert old.sha == ZLAB_QWEN3_8B_DFLASH_SHA and old.weight_digest is not None
    assert new.sha != old.sha and store.reads.get_drafter(DRAFTER).head_sha == new.sha
    [changed] = [e for e in store.events.events() if e.type == "weights_changed"]
    assert changed.payload["old_sha"] == ZLAB_QWEN3_8B_DFLASH_SHA and changed.payload["new_sha"] == new.sha


def test_hub_past_the_named_sha_with_the_same_weights_is_no_alert(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    store.catalog.load_catalog()
    repo = scenario.state.repo(DRAFTER)
    assert repo is not None
    scenario.state.commit(DRAFTER, {"README.md": repo.files["README.md"] + b"\nMore text.\n"},
                          title="Update README.md", date=repo.head.date + timedelta(days=1))
    _watcher(store, hub, tmp_path).poll_repo(DRAFTER)
    assert [r.sha for r in store.reads.drafter_revisions(DRAFTER)][0] == ZLAB_QWEN3_8B_DFLASH_SHA
    assert len(store.reads.drafter_revisions(DRAFTER)) == 2
    assert "weights_changed" not in _types(store, DRAFTER)
