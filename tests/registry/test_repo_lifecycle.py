"""One repo lifecycle for both kinds: a checkpoint and a drafter record revisions, move and go the same way."""

from __future__ import annotations

import pytest

from registry.domain.records import CheckpointSpec, DrafterSpec, EventSpec, RevisionSpec
from registry.store import Store

KINDS = ("checkpoint", "drafter")


def _record(store: Store, kind: str, repo_id: str, sha: str) -> bool:
    """Record `repo_id` of `kind` with the revision `sha`; True when the revision is new."""
    if kind == "checkpoint":
        store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id=repo_id, source="hub"))
        return store.checkpoints.add_checkpoint_revision(repo_id, RevisionSpec(sha=sha))[1]
    store.drafters.upsert_drafter(DrafterSpec(repo_id=repo_id, method="dflash", publisher=repo_id.split("/")[0], source="hub"))
    return store.drafters.add_drafter_revision(repo_id, RevisionSpec(sha=sha))[1]


@pytest.mark.parametrize("kind", KINDS)
def test_a_revision_is_recorded_once_and_the_history_follows_a_move(store: Store, kind: str) -> None:
    assert _record(store, kind, "acme/Old-8B", "a" * 40)
    assert not _record(store, kind, "acme/Old-8B", "a" * 40)
    assert _record(store, kind, "acme/Old-8B", "b" * 40)
    store.watch.rename_repo("acme/Old-8B", "other/New-8B")
    store.watch.rename_repo("acme/Old-8B", "other/New-8B")  # a rerun changes nothing
    recorded = store.watch.recorded_repo("acme/Old-8B")
    assert recorded is not None and recorded.kind == kind
    assert recorded.repo_id == "other/New-8B"
    assert recorded.head is not None and recorded.head.sha == "b" * 40
    assert recorded.shas == {"a" * 40, "b" * 40}
    if kind == "drafter":
        assert recorded.drafter is not None and recorded.drafter.publisher == "other"
    else:
        assert recorded.drafter is None
        checkpoint = store.reads.get_checkpoint("other/New-8B")
        assert checkpoint is not None and checkpoint.org == "other"
    # The watcher reads an org's known heads and vanished repos by org: the moved repo is the new org's now.
    assert store.reads.known_heads("other") == {"other/New-8B": "b" * 40}
    assert store.reads.known_heads("acme") == {}


@pytest.mark.parametrize("kind", KINDS)
def test_a_move_onto_an_id_read_already_keeps_the_older_history(store: Store, kind: str) -> None:
    _record(store, kind, "acme/Old-8B", "a" * 40)
    _record(store, kind, "acme/New-8B", "c" * 40)  # the new id, read as a repo of its own before the move was seen
    store.watch.rename_repo("acme/Old-8B", "acme/New-8B")
    recorded = store.watch.recorded_repo("acme/New-8B")
    assert recorded is not None and recorded.shas == {"a" * 40}
    assert store.watch.recorded_repo("acme/Old-8B") == recorded


@pytest.mark.parametrize("kind", KINDS)
def test_gone_is_marked_and_announced_once(store: Store, kind: str) -> None:
    _record(store, kind, "acme/Old-8B", "a" * 40)
    store.watch.rename_repo("acme/Old-8B", "acme/New-8B")
    announce = EventSpec(type="drafter_gone", subject="acme/New-8B", dedupe_key="gone:acme/New-8B",
                         payload={"message": "gone"}, org="acme")
    assert store.watch.mark_repo_gone("acme/Old-8B", "deleted on 2026-12-01", announce)  # found under its old id
    assert not store.watch.mark_repo_gone("acme/New-8B", "deleted on 2026-12-02", announce)
    recorded = store.watch.recorded_repo("acme/New-8B")
    assert recorded is not None and recorded.status == "gone" and recorded.record.status_detail == "deleted on 2026-12-01"
    assert [e.subject for e in store.events.events()] == ["acme/New-8B"]
    assert store.watch.recorded_repo("acme/Nothing-8B") is None
    assert not store.watch.mark_repo_gone("acme/Nothing-8B", "deleted")
