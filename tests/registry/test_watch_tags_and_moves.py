"""Renames, drafter tags and staged releases against the fake Hub (issue 21 items 2, 3 and 5).

- A drafter renamed and then committed to within one poll interval stays one drafter with its history; no second
  `drafter_released`.
- Drafters found by tag outside the watched orgs are re-read when no tag lists them any more: deleted or made
  private they are marked gone, renamed they stay one drafter.
- The `speculative-decoding` tag lists targets too: they are not recorded as checkpoints nor announced; a tag's
  first poll records its whole back catalogue; a staged release's lag starts when it went public.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from registry.domain.records import DrafterSpec, RevisionSpec
from registry.hub import HubClient
from registry.reports import lag_table
from registry.store import Store
from registry.watch import units
from registry.watch.queries import DRAFTER_QUERIES
from registry.watch.poller import Watcher
from tests.fakehub.scenario import (
    QWEN3_8B_CONFIG,
    QWEN3_8B_DFLASH_CONFIG,
    QWEN35_27B_DFLASH_CONFIG,
    QWEN36_27B_CONFIG,
    Scenario,
)
from tests.fakehub.server import FakeHub
from tests.fakehub.state import dflash_drafter_files, target_files, utc

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
INDIE = "indie-lab/Qwen3-8B-DFlash-indie"


def make_watcher(store: Store, hub: FakeHub, tmp_path: Path, **kwargs) -> Watcher:  # type: ignore[no-untyped-def]
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05)
    return Watcher(store, client, ORGS, **kwargs)


def events(store: Store) -> list[tuple[str, str]]:
    return [(e.type, e.subject) for e in store.events.events()]


# ---- item 2: rename then commit within one poll interval -------------------------------------------------------

def test_a_drafter_renamed_then_committed_to_stays_one_drafter_with_its_history(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    old, new = "z-lab/Qwen3-4B-DFlash-b16", "z-lab/Qwen3-4B-DFlash"
    drafter = store.reads.get_drafter(old)
    history = [r.sha for r in store.reads.drafter_revisions(old)]
    scenario.state.rename(old, new)
    retrained = scenario.state.commit(
        new, {"model.safetensors": dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 41)["model.safetensors"]},
        title="Upload retrained weights", date=scenario.now + timedelta(days=1))
    report = watcher.poll_once()
    assert not report.errors
    assert [t for t, _ in events(store)] == ["weights_changed"]  # no second drafter_released
    [one] = [d for d in store.reads.drafters() if "Qwen3-4B-DFlash" in d.repo_id]
    assert (one.id, one.repo_id, one.head_sha, one.status) == (drafter.id, new, retrained.sha, "ok")
    assert [r.sha for r in store.reads.drafter_revisions(new)] == [*history, retrained.sha]
    assert store.reads.get_drafter(old).repo_id == new


def test_a_move_onto_an_id_recorded_meanwhile_keeps_the_old_records_history(store: Store) -> None:
    old, new = "z-lab/Moved-DFlash", "z-lab/Moved-DFlash-v2"
    for repo_id, sha in ((old, "a" * 40), (old, "b" * 40), (new, "c" * 40)):
        store.drafters.upsert_drafter(DrafterSpec(repo_id=repo_id, method="dflash", publisher="z-lab", source="hub"))
        store.drafters.add_drafter_revision(repo_id, RevisionSpec(sha=sha, last_modified=utc(2026, 1, 1)))
    first = store.reads.get_drafter(old)
    store.watch.rename_repo(old, new)
    assert store.reads.get_drafter(new).id == first.id and store.reads.get_drafter(old).id == first.id
    assert [r.sha for r in store.reads.drafter_revisions(new)][:2] == ["a" * 40, "b" * 40]


# ---- item 3: drafters found by tag are re-read -----------------------------------------------------------------

def publish_indie(scenario: Scenario, name: str = INDIE, *, tags: tuple[str, ...] = ("dflash",),
                  days: int = 3) -> None:
    day = scenario.now + timedelta(days=days)
    scenario.state.add_repo(
        name, created_at=day, date=day, files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 99), tags=tags,
        library_name="transformers", card_data={"license": "mit", "base_model": "Qwen/Qwen3-8B"})


@pytest.mark.parametrize("change", ["deleted", "made_private", "renamed"])
def test_a_drafter_found_by_tag_that_no_tag_lists_any_more_is_read_again(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, change: str
) -> None:
    watcher = make_watcher(store, hub, tmp_path, drafter_queries=DRAFTER_QUERIES)
    watcher.poll_once()
    publish_indie(scenario)
    publish_indie(scenario, "other-lab/Qwen3-8B-DFlash-other", days=4)  # newer: INDIE is behind the cursor
    watcher.poll_once()
    drafter = store.reads.get_drafter(INDIE)
    assert drafter is not None and drafter.status == "ok"
    renamed = "indie-lab/Qwen3-8B-DFlash-v2"
    if change == "deleted":
        scenario.state.delete(INDIE)
    elif change == "made_private":
        scenario.state.set_private(INDIE, True)
    else:
        scenario.state.rename(INDIE, renamed)
    report = watcher.poll_once()
    assert not report.errors
    if change == "renamed":
        assert report.events == []
        [one] = [d for d in store.reads.drafters() if d.repo_id.startswith("indie-lab/")]
        assert store.reads.get_drafter(INDIE).id == drafter.id  # the old id is an alias
        assert (one.id, one.repo_id, one.status) == (drafter.id, renamed, "ok")
    else:
        assert [(e.type, e.subject) for e in report.events] == [("drafter_gone", INDIE)]
        assert store.reads.get_drafter(INDIE).status == "gone"
    # Settled: a quiet poll costs one id listing per org and per tag again.
    hub.clear_requests()
    assert watcher.poll_once().events == [] and len(hub.requests) == len(ORGS) + len(DRAFTER_QUERIES)
    if change == "made_private":  # and public again: listed by its tag, read, ok again, announced nothing
        scenario.state.set_private(INDIE, False)
        assert watcher.poll_once().events == [] and store.reads.get_drafter(INDIE).status == "ok"


# ---- item 5: what tag queries record, and staged releases ---------------------------------------------------------

def test_a_tagged_model_that_is_no_drafter_is_not_recorded_or_announced(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path, drafter_queries=DRAFTER_QUERIES)
    watcher.poll_once()
    day = scenario.now + timedelta(days=2)
    # A target whose card says it serves well with speculative decoding: tagged, no drafter.
    scenario.state.add_repo("someone/Qwen3-8B-Support-Chat", created_at=day, date=day,
                            files=target_files(QWEN3_8B_CONFIG, weight_seed=77), tags=("speculative-decoding",),
                            pipeline_tag="text-generation", library_name="transformers")
    publish_indie(scenario)
    report = watcher.poll_once()
    assert not report.errors
    assert [(e.type, e.subject) for e in report.events] == [("drafter_released", INDIE)]
    assert store.reads.get_checkpoint("someone/Qwen3-8B-Support-Chat") is None


def test_a_tags_first_poll_records_its_whole_back_catalogue(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    config = json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}).encode()
    for index in range(60):
        day = scenario.now - timedelta(days=100 - index)
        scenario.state.add_repo(f"eagle-fans-{index:02d}/Qwen3-8B-EAGLE3", created_at=day, date=day,
                                files={"config.json": config}, tags=("eagle3",), library_name="transformers")
    watcher = make_watcher(store, hub, tmp_path, drafter_queries=("eagle3",))
    report = watcher.poll_once()
    assert not report.errors and report.events == []  # the back catalogue is recorded, not announced
    assert len([d for d in store.reads.drafters() if d.repo_id.startswith("eagle-fans-")]) == 60


def test_a_staged_releases_lag_starts_when_it_went_public(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    scenario.advance("qwen35_27b_appears")
    scenario.advance("drafter_for_qwen35_27b")
    watcher.poll_once()
    card = {"library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}
    # Created (privately) on 2026-02-01, last committed 2026-02-02, public on 2026-04-10.
    scenario.state.add_repo("Qwen/Qwen3.7-27B", created_at=utc(2026, 2, 1), date=utc(2026, 2, 2),
                            files=target_files(QWEN36_27B_CONFIG, weight_seed=3727, card_data=card),
                            pipeline_tag="text-generation", library_name="transformers", private=True)
    watcher.poll_once()
    flipped = utc(2026, 4, 10, 9)
    monkeypatch.setattr(units, "utcnow", lambda: flipped)  # the watcher's clock: the day it saw it public
    scenario.state.set_private("Qwen/Qwen3.7-27B", False)
    assert not watcher.poll_once().errors
    assert ("base_upgrade", "Qwen/Qwen3.7-27B") in events(store)
    assert store.reads.get_checkpoint("Qwen/Qwen3.7-27B").released == flipped.date()

    day: datetime = utc(2026, 4, 15)
    scenario.state.add_repo("z-lab/Qwen3.7-27B-DFlash", created_at=day, date=day + timedelta(hours=1),
                            files=dflash_drafter_files(QWEN35_27B_DFLASH_CONFIG, 37, target_repo="Qwen/Qwen3.7-27B"),
                            card_data={"license": "mit", "base_model": "Qwen/Qwen3.7-27B"}, tags=("dflash",),
                            library_name="transformers")
    watcher.poll_once()
    [closed] = [e for e in store.events.events() if e.type == "lag_closed" and e.subject == "Qwen/Qwen3.7-27B"]
    assert closed.payload["lag_days"] == 5  # from the public flip, not from createdAt (73 days)
    row = {r.target_repo_id: r for r in lag_table(store, day.date())}["Qwen/Qwen3.7-27B"]
    assert row.lag_days == 5
