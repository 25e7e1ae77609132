"""One poll's store round trips (SQL statements) grow with the orgs it polls, not with their models (issue 25
item 6): what is recorded of an org's listing is read in one query, and the models recorded from the listing
alone are written in one statement per table. Counts, not timings: bench/watch.py times the poll."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from registry.domain.records import CheckpointSpec, RevisionSpec
from registry.store import Store
from registry.store.db import StatementCounter
from registry.watch.poller import UNIT_BATCH, Watcher
from tests.fakehub.scenario import DAY_0
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState
from tests.registry.watch_support import make_client

# org -> models; every listing fits one unit of work, as a real org's usually does (the biggest have ~1,000).
SIZES = {"small": 20, "big": 400, "one": 20, "two": 20, "three": 20}
assert max(SIZES.values()) <= UNIT_BATCH


def hub_state() -> HubState:
    state = HubState()
    start = DAY_0 - timedelta(days=100)
    index = 0
    for org, size in SIZES.items():
        for number in range(size):
            created = start + timedelta(minutes=index)
            index += 1
            config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "index": index}
            state.add_repo(f"{org}/model-{number:04d}", created_at=created, date=created + timedelta(seconds=30),
                           files={"config.json": json.dumps(config).encode()}, library_name="transformers")
    return state


def statements(store: Store, counter: StatementCounter, watcher: Watcher) -> int:
    before = counter.count
    report = watcher.poll_once()
    assert not report.errors
    return counter.count - before


def test_a_poll_s_store_round_trips_grow_per_org_not_per_model(store: Store, tmp_path: Path) -> None:
    state = hub_state()
    counter = StatementCounter(store.engine)
    with FakeHub(state) as hub:
        def watcher(*orgs: str) -> Watcher:
            return Watcher(store, make_client(hub.url, tmp_path / "hub-cache"), list(orgs))

        small, big = watcher("small"), watcher("big")
        first_small, first_big = statements(store, counter, small), statements(store, counter, big)
        # 20 times the models, the same statements: nothing is read or written one model at a time.
        assert first_big == first_small
        assert len(store.reads.checkpoints()) == SIZES["small"] + SIZES["big"]
        assert all(len(store.reads.revisions(c.repo_id)) == 1 for c in store.reads.checkpoints())

        # Orgs do add their own: an org of the same size costs the same, a second org in one poll all but that
        # again (the poll's own reads are shared).
        one, two = statements(store, counter, watcher("one")), statements(store, counter, watcher("two", "three"))
        assert one == first_small
        assert 0 < two - one < one

        # A re-poll that finds one change reads the same whatever the org's size.
        for org in ("small", "big"):
            state.commit(f"{org}/model-0000", {"README.md": b"# edited\n"}, title="Update README.md", date=DAY_0)
        again_small, again_big = statements(store, counter, small), statements(store, counter, big)
        assert again_big == again_small
        edited = state.repo("big/model-0000")
        assert edited is not None and store.reads.get_checkpoint("big/model-0000").head_sha == edited.sha


def test_a_listed_model_whose_rows_cannot_be_written_fails_alone(store: Store, tmp_path: Path) -> None:
    """Models recorded from the listing alone are written together, at their unit's end: when those rows fail
    (here a card's base model longer than any repo id, which PostgreSQL refuses), the batch is recorded again one
    model at a time, and only the hostile one fails."""
    if store.engine.dialect.name == "sqlite":
        pytest.skip("SQLite does not enforce column lengths")
    state = HubState()
    for number in range(20):
        created = DAY_0 - timedelta(days=30 - number)
        card = {"base_model": "acme/" + "B" * 300} if number == 7 else None
        state.add_repo(f"acme/model-{number:02d}", created_at=created, date=created, card_data=card,
                       files={"config.json": b'{"model_type": "qwen3"}'}, library_name="transformers")
    with FakeHub(state) as hub:
        watcher = Watcher(store, make_client(hub.url, tmp_path / "hub-cache"), ["acme"])
        report = watcher.poll_once()
    [org] = report.orgs
    assert org.failed == ["acme/model-07"]
    assert org.error is None
    assert sorted(c.repo_id for c in store.reads.checkpoints()) == [f"acme/model-{n:02d}" for n in range(20) if n != 7]


def test_the_listing_read_says_what_one_read_per_model_says(store: Store) -> None:
    """checkpoint_states (one query for a listing) and checkpoint_state (one model) agree: an old id that now
    redirects, a checkpoint with a head read from its config and one recorded from a listing only."""
    day = DAY_0 - timedelta(days=3)
    store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id="acme/Old-8B", source="hub", bases=(("acme/Base-8B", "finetune"),)))
    store.checkpoints.add_checkpoint_revision("acme/Old-8B", RevisionSpec(sha="a" * 40, last_modified=day,
                                                              config_raw=b'{"model_type": "qwen3"}'))
    store.checkpoints.rename_checkpoint("acme/Old-8B", "acme/New-8B")
    with store.unit():
        store.checkpoints.add_listed_checkpoint(CheckpointSpec(repo_id="acme/Listed-8B", source="hub"),
                                    RevisionSpec(sha="b" * 40, last_modified=day))
    ids = ["acme/Old-8B", "acme/New-8B", "acme/Listed-8B", "acme/Unknown-8B"]
    one_by_one = {repo_id: store.watch.checkpoint_state(repo_id) for repo_id in ids}
    assert store.watch.checkpoint_states(ids) == {k: v for k, v in one_by_one.items() if v is not None}
    assert one_by_one["acme/Old-8B"].record.repo_id == "acme/New-8B"
    assert not one_by_one["acme/New-8B"].needs_details and one_by_one["acme/Listed-8B"].needs_details
