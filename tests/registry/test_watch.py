"""The watcher against the fake Hub (a real HTTP server) through the real huggingface_hub client."""

from __future__ import annotations

from pathlib import Path


from registry.hub import HubClient
from registry.reports import lag_table
from registry.store import Store
from registry.watch.poller import Watcher
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]


def make_watcher(store: Store, hub: FakeHub, tmp_path: Path, **kwargs) -> Watcher:  # type: ignore[no-untyped-def]
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=2, backoff_base=0.01,
                       backoff_cap=0.05)
    return Watcher(store, client, ORGS, **kwargs)


def events(store: Store) -> list[tuple[str, str]]:
    return [(e.type, e.subject) for e in store.events.events()]


def test_scenario_timeline_gives_the_events_a_human_would_list(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    day0 = watcher.poll_once()
    assert not day0.errors
    assert events(store) == []  # day 0 is the baseline: what already exists is recorded, not announced
    assert [t for t, _ in store.reads.get_drafter("z-lab/Qwen3-8B-DFlash-b16").targets] == ["Qwen/Qwen3-8B"]
    verdicts = {(v.drafter_repo_id, v.checkpoint_repo_id): v.verdict for v in store.reads.verdicts()}
    # Its name implies the target, its card declares none (as z-lab's): structural, never exact on a name alone;
    # the lag still counts it, z-lab being a watched publisher (registry/domain/reliance.py).
    assert verdicts[("z-lab/Qwen3-8B-DFlash-b16", "Qwen/Qwen3-8B")] == "structural"
    assert verdicts[("z-lab/Qwen3-8B-DFlash-b16", "acme-labs/Qwen3-8B-Support-FT")] == "structural"
    assert store.reads.get_drafter("z-lab/Kimi-K2.6-DFlash").status == "gated"

    scenario.advance("qwen35_27b_appears")
    watcher.poll_once()
    # A new generation of a line whose previous generation has drafters, and none for it: a base upgrade.
    assert events(store) == [("new_checkpoint", "Qwen/Qwen3.5-27B"), ("base_upgrade", "Qwen/Qwen3.5-27B")]
    [upgrade] = [e for e in store.events.events() if e.type == "base_upgrade"]
    assert upgrade.payload["predecessors"] == ["Qwen/Qwen3-4B", "Qwen/Qwen3-8B"]
    assert upgrade.payload["predecessor_drafters"] == ["z-lab/Qwen3-4B-DFlash-b16", "z-lab/Qwen3-8B-DFlash-b16"]
    lag_before = {r.target_repo_id: r for r in lag_table(store, scenario.now.date())}

    scenario.advance("drafter_for_qwen35_27b")
    watcher.poll_once()
    new = events(store)[2:]
    assert new == [("drafter_released", "z-lab/Qwen3.5-27B-DFlash"), ("lag_closed", "Qwen/Qwen3.5-27B")]
    closed = [e for e in store.events.events() if e.type == "lag_closed"][0]
    assert closed.payload["lag_days"] == 14
    lag_after = {r.target_repo_id: r for r in lag_table(store, scenario.now.date())}
    assert lag_after["Qwen/Qwen3.5-27B"].lag_days == 14 and not lag_after["Qwen/Qwen3.5-27B"].open
    assert "Qwen/Qwen3.5-27B" not in lag_before or lag_before["Qwen/Qwen3.5-27B"].open

    count = len(store.events.events())
    scenario.advance("weights_replaced")
    watcher.poll_once()
    assert events(store)[count:] == [("weights_changed", "z-lab/Qwen3-8B-DFlash-b16")]

    count = len(store.events.events())
    scenario.advance("readme_only_commit")
    watcher.poll_once()
    assert events(store)[count:] == []
    assert len(store.reads.drafter_revisions("z-lab/Qwen3-8B-DFlash-b16")) == 3

    scenario.advance("repo_renamed")
    watcher.poll_once()
    assert events(store)[count:] == []
    llamas = [c.repo_id for c in store.reads.checkpoints() if "Llama-3.1-8B-Instruct" in c.repo_id]
    assert llamas == ["meta-llama/Llama-3.1-8B-Instruct"]

    scenario.advance("qwen36_27b_appears")
    watcher.poll_once()
    tail = events(store)[count:]
    assert tail[0] == ("new_checkpoint", "Qwen/Qwen3.6-27B")
    upgrades = [e for e in store.events.events() if e.type == "base_upgrade" and e.subject == "Qwen/Qwen3.6-27B"]
    assert [e.payload["predecessors"] for e in upgrades] == [["Qwen/Qwen3.5-27B"]]
    assert upgrades[0].payload["predecessor_drafters"] == ["z-lab/Qwen3.5-27B-DFlash"]


def test_repoll_without_change_costs_one_listing_per_org(store: Store, hub: FakeHub, tmp_path: Path) -> None:
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    hub.clear_requests()
    report = watcher.poll_once()
    assert not report.errors
    assert len(hub.requests) == len(ORGS)
    assert all(r.path == "/api/models" for r in hub.requests)
