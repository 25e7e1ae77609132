"""The watcher watches what the catalog names (issue 28 item 2), against the fake Hub.

- The default watch list is every publisher of the catalog, derived from it.
- A catalog drafter of an org nobody watches that is deleted from the Hub stops being "ok".
- Hub tags keep their author's case (`nvidia/Kimi-K2.7-Code-DFlash` is tagged `DFlash`) and the Hub's tag filter
  matches exactly, so drafters are also listed by a word of their name, which the Hub's search matches in any case.
"""

from __future__ import annotations

import json
from datetime import timedelta
from importlib import resources
from pathlib import Path

import httpx
import pytest

from registry.domain.watch_list import watched_orgs
from registry.domain.records import DrafterSpec
from registry.hub import HubClient
from registry.settings import Settings
from registry.store import Store
from registry.watch.queries import DRAFTER_QUERIES
from registry.watch.poller import Watcher
from tests.fakehub.scenario import DAY_0, QWEN3_8B_DFLASH_CONFIG
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, dflash_drafter_files

NVIDIA_DRAFTER = "nvidia/Kimi-K2.7-Code-DFlash"
ORGS = ["moonshotai", "z-lab"]


def test_the_default_watch_list_is_every_catalog_publisher(monkeypatch: pytest.MonkeyPatch) -> None:
    document = json.loads(resources.files("registry").joinpath("data", "catalog.json").read_text(encoding="utf-8"))
    owners = {entry["repo_id"].split("/")[0] for entry in document["targets"] + document["drafters"]}
    monkeypatch.delenv("DRAFTERS_WATCHED_ORGS", raising=False)
    default = watched_orgs(Settings().watched_orgs)
    assert set(default) == owners and len(default) == len(owners)
    # The publishers the hand-written list of issue 21 left out.
    assert {"mistralai", "meta-models", "nvidia", "inclusionAI", "AQ-MedAI", "Inferact", "LithosAI", "Lucebox",
            "lightseekorg", "nebius", "novita", "zhuyksir"} <= set(default)
    monkeypatch.setenv("DRAFTERS_WATCHED_ORGS", '["Qwen"]')
    assert watched_orgs(Settings().watched_orgs) == ["Qwen"]


def _publish_nvidia_drafter(state: HubState) -> None:
    day = DAY_0 - timedelta(days=3)
    # As on the Hub: the author's own tag spelling, the card's base_model.
    state.add_repo(NVIDIA_DRAFTER, created_at=day, date=day, files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 5),
                   tags=("DFlash",), library_name="transformers",
                   card_data={"license": "other", "base_model": "moonshotai/Kimi-K2.7-Code"})


def _watcher(store: Store, hub: FakeHub, tmp_path: Path) -> Watcher:
    client = HubClient(hub.url, None, tmp_path / "cache", timeout=5.0, max_retries=1, backoff_base=0.01)
    return Watcher(store, client, list(ORGS), drafter_queries=DRAFTER_QUERIES)


def test_the_fake_hub_filters_tags_exactly_and_searches_ids_in_any_case() -> None:
    state = HubState()
    _publish_nvidia_drafter(state)
    with FakeHub(state) as hub:
        def ids(**params: str) -> list[str]:
            return [m["id"] for m in httpx.get(f"{hub.url}/api/models", params=params).json()]

        assert ids(filter="dflash") == [] and ids(filter="DFlash") == [NVIDIA_DRAFTER]
        assert ids(search="dflash") == ids(search="DFLASH") == [NVIDIA_DRAFTER]


def test_a_drafter_tagged_in_its_authors_case_is_found_by_its_name(store: Store, tmp_path: Path) -> None:
    state = HubState()
    _publish_nvidia_drafter(state)
    with FakeHub(state) as hub:
        report = _watcher(store, hub, tmp_path).poll_once()
    assert not report.errors
    drafter = store.reads.get_drafter(NVIDIA_DRAFTER)
    assert drafter is not None and drafter.method == "dflash" and drafter.status == "ok"


def test_a_deleted_catalog_drafter_outside_the_watched_orgs_stops_being_ok(store: Store, tmp_path: Path) -> None:
    state = HubState()
    _publish_nvidia_drafter(state)
    store.drafters.upsert_drafter(DrafterSpec(repo_id=NVIDIA_DRAFTER, method="dflash", publisher="nvidia",
                                              source="catalog"))
    with FakeHub(state) as hub:
        watcher = _watcher(store, hub, tmp_path)
        assert not watcher.poll_once().errors
        assert store.reads.get_drafter(NVIDIA_DRAFTER).status == "ok"
        # Settled: a quiet poll costs the org and query id listings, and one for the catalog drafters' org.
        hub.clear_requests()
        assert watcher.poll_once().events == []
        assert len(hub.requests) == len(ORGS) + len(DRAFTER_QUERIES) + 1
        state.delete(NVIDIA_DRAFTER)
        report = watcher.poll_once()
    assert not report.errors
    gone = store.reads.get_drafter(NVIDIA_DRAFTER)
    assert gone.status == "gone" and gone.source == "catalog"
