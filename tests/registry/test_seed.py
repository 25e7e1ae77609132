"""registry/store/seed.py, the benchmarks' factory of seeded rows: what it writes, the store reads back as records
and runs, the same as the store's own writes would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from registry.store import Store
from registry.store.seed import copy_checkpoints, copy_run, insert_rows, insert_runs, repo_ids, revision_ids, run_pairs
from tests.registry.run_fixtures import full_run

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def seed_pair(store: Store) -> None:
    """One checkpoint and one drafter, each with a head revision, and an exact verdict between them."""
    insert_rows(store, "checkpoint", [{"repo_id": "acme/Base-8B", "org": "acme", "kind": "base", "source": "hub",
                                       "first_seen": T0, "head_sha": "c" * 40}])
    insert_rows(store, "drafter", [{"repo_id": "lab/Base-8B-DFlash", "method": "dflash", "publisher": "lab",
                                    "source": "hub", "first_seen": T0, "head_sha": "d" * 40}])
    (checkpoint, _), = repo_ids(store, "checkpoint")
    (drafter, _), = repo_ids(store, "drafter")
    insert_rows(store, "checkpoint_revision", [{"checkpoint_id": checkpoint, "sha": "c" * 40, "seen_at": T0,
                                                "hidden_size": 4096}])
    insert_rows(store, "drafter_revision", [{"drafter_id": drafter, "sha": "d" * 40, "seen_at": T0}])
    insert_rows(store, "compatibility", [{
        "drafter_revision_id": revision_ids(store, "drafter")[drafter],
        "checkpoint_revision_id": revision_ids(store, "checkpoint")[checkpoint],
        "verdict": "exact", "reasons": ["seeded"], "checks": [], "checked_at": T0}])


def test_seeded_rows_read_back_as_the_stores_records(store: Store) -> None:
    seed_pair(store)
    assert [c.repo_id for c in store.reads.checkpoints()] == ["acme/Base-8B"]
    head = store.reads.head_revision("acme/Base-8B")
    assert head is not None and head.sha == "c" * 40 and head.hidden_size == 4096
    [verdict] = store.reads.verdicts(checkpoint_repo_id="acme/Base-8B")
    assert (verdict.drafter_repo_id, verdict.verdict, verdict.reasons) == ("lab/Base-8B-DFlash", "exact", ("seeded",))


def test_seeded_runs_read_back_as_the_runs_they_were_made_from(store: Store) -> None:
    runs = [full_run(prediction=None, run_id=f"seeded-{n}", created_at=T0 + timedelta(minutes=n)) for n in range(3)]
    insert_runs(store, runs)
    assert [store.runs.get_run(run.run_id) for run in runs] == runs
    assert [len(run.per_set) for run in store.runs.list_runs()] == [2, 2, 2]


def test_copies_of_a_run_and_of_checkpoints_read_back(store: Store) -> None:
    seed_pair(store)
    original = full_run(target="acme/Base-8B", drafter="lab/Base-8B-DFlash", prediction=None, run_id="original",
                        created_at=T0)
    insert_runs(store, [original])
    copy_run(store, "original", ({"run_id": f"copy-{n}", "hardware": f"gpu-{n}"} for n in range(6_000)))
    copy = store.runs.get_run("copy-5999")
    assert copy is not None and (copy.hardware, copy.target, copy.tau) == ("gpu-5999", original.target, original.tau)
    assert len(store.runs.list_runs()) == 6_001

    made = copy_checkpoints(store, 3, prefix="copy")
    assert made == {"copy-00001/Base-8B": "acme/Base-8B", "copy-00002/Base-8B": "acme/Base-8B"}
    for repo_id in made:
        checkpoint, head = store.reads.get_checkpoint(repo_id), store.reads.head_revision(repo_id)
        assert checkpoint is not None and checkpoint.org == repo_id.split("/")[0]
        assert head is not None and head.sha == "c" * 40
        assert [v.verdict for v in store.reads.verdicts(checkpoint_repo_id=repo_id)] == ["exact"]
    assert run_pairs(store, ["acme/Base-8B", "copy-00001/Base-8B"]) == [("acme/Base-8B", "lab/Base-8B-DFlash")]
