"""What a poll reads does not grow with the history the registry holds (issue 31 item 2): the poll learns its
first event id without reading the event log, a new drafter's unit reads the verdicts of its declared targets
only, and a drafter's name-implied targets come from a filtered query, not every checkpoint. Behaviour, not
timings: bench/watch_history.py times them at 1,000 / 10,000 / 100,000 events and 10,000 targets."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from registry.domain.records import CheckpointSpec, EventSpec, RevisionSpec
from registry.hub import HubClient
from registry.store import Store
from registry.store.db import StatementCounter
from registry.watch.poller import Watcher
from tests.fakehub.scenario import DAY_0, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState
from tests.registry.watch_support import make_client


def _spy(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    original = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, spy)
    return calls


def test_a_poll_that_closes_a_lag_reads_neither_the_event_log_nor_every_verdict(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=2, backoff_base=0.01,
                       backoff_cap=0.05)
    watcher = Watcher(store, client, ["Qwen", "z-lab", "meta-llama", "acme-labs"])
    watcher.poll_once()
    scenario.advance("qwen35_27b_appears")
    watcher.poll_once()
    for n in range(50):  # history the poll must not read
        store.events.record_event(EventSpec(type="note", subject=f"s{n}", dedupe_key=f"history-{n}"))
    scenario.advance("drafter_for_qwen35_27b")
    event_reads = _spy(monkeypatch, store.events, "events")
    verdict_reads = _spy(monkeypatch, store.reads, "verdicts")
    checkpoint_reads = _spy(monkeypatch, store.reads, "checkpoints")
    report = watcher.poll_once()
    # The same answer as before: this poll's events, the lag closed by the drafter's first exact verdict.
    assert [(e.type, e.subject) for e in report.events] == [
        ("drafter_released", "z-lab/Qwen3.5-27B-DFlash"), ("lag_closed", "Qwen/Qwen3.5-27B")]
    assert all(call.get("after_id") is not None for call in event_reads), event_reads
    assert all(call.get("checkpoint_repo_id") or call.get("drafter_repo_id") for call in verdict_reads), verdict_reads
    assert checkpoint_reads == []


def test_name_implied_targets_are_found_by_their_stored_name_key_among_many(store: Store) -> None:
    for repo_id in ("Qwen/Qwen3-8B", "someone/qwen_3-8b", "Qwen/Qwen3-8B-Base", "other/Qwen3-80B", "x/qwen.3-8b"):
        store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id=repo_id, source="hub"))
    # One written from a listing (a multi-row insert, not the ORM) is found the same way.
    store.checkpoints.add_listed_checkpoint(CheckpointSpec(repo_id="listed/QWEN3-8b", source="hub"),
                                            RevisionSpec(sha="1" * 40))
    assert {c.repo_id for c in store.reads.checkpoints_named("qwen-3-8b")} == {
        "Qwen/Qwen3-8B", "listed/QWEN3-8b", "someone/qwen_3-8b"}
    assert store.reads.checkpoints_named("qwen-3-8b-base")[0].repo_id == "Qwen/Qwen3-8B-Base"
    assert store.reads.checkpoints_named("nothing-like-it") == []
    # A renamed checkpoint is found under the name it has now, no longer under the old one.
    store.checkpoints.rename_checkpoint("someone/qwen_3-8b", "someone/Qwen3-14B")
    assert [c.repo_id for c in store.reads.checkpoints_named("qwen-3-14b")] == ["someone/Qwen3-14B"]
    assert {c.repo_id for c in store.reads.checkpoints_named("qwen-3-8b")} == {"Qwen/Qwen3-8B", "listed/QWEN3-8b"}


def test_a_quiet_re_poll_s_bookkeeping_is_a_few_statements_per_org(store: Store, tmp_path: Path) -> None:
    """Lease (taken and read back by one UPDATE), the org's failures (one read), what is recorded of the org (one
    read per table) and the lease's release: five statements for each org a quiet re-poll adds, not ten."""
    state = HubState()
    for org in ("one", "two", "three"):
        for n in range(3):
            created = DAY_0 - timedelta(days=10, minutes=n)
            state.add_repo(f"{org}/model-{n}", created_at=created, date=created, library_name="transformers",
                           files={"config.json": json.dumps({"model_type": "qwen3"}).encode()})
    counter = StatementCounter(store.engine)
    with FakeHub(state) as hub:
        def quiet_repoll(*orgs: str) -> int:
            watcher = Watcher(store, make_client(hub.url, tmp_path / "hub-cache"), list(orgs), drafter_queries=())
            assert not watcher.poll_once().errors
            before = counter.count
            assert not watcher.poll_once().errors
            return counter.count - before

        one = quiet_repoll("one")
        three = quiet_repoll("one", "two", "three")
    assert (three - one) / 2 <= 5
