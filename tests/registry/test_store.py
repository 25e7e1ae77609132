"""The store on SQLite and PostgreSQL: idempotent writes, verdicts between head revisions, events once."""

from __future__ import annotations

import json

from registry.domain.records import CheckpointSpec, DrafterSpec, EventSpec, RevisionSpec
from registry.reports import find_for_checkpoint
from registry.store import Store
from tests.snapshot import snapshot

QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 151936,
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
}
DFLASH_8B = {
    "architectures": ["DFlashDraftModel"],
    "model_type": "qwen3",
    "block_size": 16,
    "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]},
    "num_target_layers": 36,
    "num_hidden_layers": 5,
    "hidden_size": 4096,
    "vocab_size": 151936,
}


def _raw(config: dict) -> bytes:
    return json.dumps(config).encode()


def _seed_pair(store: Store, target_config: dict = QWEN3_8B) -> None:
    store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id="Qwen/Qwen3-8B", source="hub", kind="base"))
    store.checkpoints.add_checkpoint_revision("Qwen/Qwen3-8B", RevisionSpec(sha="a" * 40, config_raw=_raw(target_config)))
    store.drafters.upsert_drafter(
        DrafterSpec(
            repo_id="z-lab/Qwen3-8B-DFlash-b16",
            method="dflash",
            publisher="z-lab",
            source="hub",
            targets=(("Qwen/Qwen3-8B", "catalog"),),
        )
    )
    store.drafters.add_drafter_revision("z-lab/Qwen3-8B-DFlash-b16", RevisionSpec(sha="b" * 40, config_raw=_raw(DFLASH_8B)))


def test_revision_is_recorded_once(store: Store) -> None:
    _seed_pair(store)
    again, created = store.checkpoints.add_checkpoint_revision("Qwen/Qwen3-8B", RevisionSpec(sha="a" * 40, config_raw=b"{}"))
    assert not created
    assert again.hidden_size == 4096  # the stored revision, not the second call's config
    assert len(store.reads.revisions("Qwen/Qwen3-8B")) == 1


def test_exact_pair_and_new_revision_gets_new_verdict(store: Store) -> None:
    _seed_pair(store)
    verdicts = store.verdicts.recompute_compatibility()
    assert [(v.drafter_repo_id, v.checkpoint_repo_id, v.verdict) for v in verdicts] == [
        ("z-lab/Qwen3-8B-DFlash-b16", "Qwen/Qwen3-8B", "exact")
    ]
    wider = dict(QWEN3_8B, hidden_size=5120)
    store.checkpoints.add_checkpoint_revision("Qwen/Qwen3-8B", RevisionSpec(sha="c" * 40, config_raw=_raw(wider)))
    store.verdicts.recompute_compatibility(checkpoint_repo_id="Qwen/Qwen3-8B")
    current = store.reads.verdicts(checkpoint_repo_id="Qwen/Qwen3-8B")
    assert len(current) == 1 and current[0].checkpoint_sha == "c" * 40
    assert current[0].verdict == "incompatible"
    assert any("hidden_size" in reason and "5120" in reason for reason in current[0].reasons)
    history = store.reads.verdicts(checkpoint_repo_id="Qwen/Qwen3-8B", heads_only=False)
    assert {v.verdict for v in history} == {"exact", "incompatible"}


def test_malformed_config_is_kept_as_unknown(store: Store) -> None:
    store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id="someone/broken-8B", source="hub"))
    revision, _ = store.checkpoints.add_checkpoint_revision("someone/broken-8B", RevisionSpec(sha="d" * 40, config_raw=b'{"hidden_'))
    assert revision.config is None and revision.config_problem
    store.drafters.upsert_drafter(
        DrafterSpec(repo_id="z-lab/x-DFlash", method="dflash", publisher="z-lab", source="hub",
                    targets=(("someone/broken-8B", "name_convention"),))
    )
    store.drafters.add_drafter_revision("z-lab/x-DFlash", RevisionSpec(sha="e" * 40, config_raw=_raw(DFLASH_8B)))
    [verdict] = store.verdicts.recompute_compatibility(checkpoint_repo_id="someone/broken-8B")
    assert verdict.verdict == "unknown"
    assert any(revision.config_problem.split(":")[0] in reason for reason in verdict.reasons)


def test_rename_keeps_one_checkpoint(store: Store) -> None:
    old, new = "meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"
    store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id=old, source="hub"))
    store.checkpoints.add_checkpoint_revision(old, RevisionSpec(sha="f" * 40))
    store.checkpoints.rename_checkpoint(old, new)
    store.checkpoints.rename_checkpoint(old, new)
    assert [c.repo_id for c in store.reads.checkpoints()] == [new]
    assert store.reads.get_checkpoint(old).repo_id == new
    assert store.checkpoints.canonical_repo_id(old) == new
    store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id=old, source="hub", family="llama"))
    assert [c.repo_id for c in store.reads.checkpoints()] == [new]


def test_event_recorded_once(store: Store) -> None:
    spec = EventSpec(type="new_checkpoint", subject="Qwen/Qwen3-8B", dedupe_key="new_checkpoint:Qwen/Qwen3-8B",
                     payload={"message": "new"}, org="Qwen")
    first = store.events.record_event(spec)
    assert first is not None and first.payload == {"message": "new"}
    assert store.events.record_event(spec) is None
    assert len(store.events.events()) == 1
    assert store.events.events(types=["base_upgrade"]) == []
    assert len(store.events.events(org="Qwen")) == 1


def test_catalog_loads_idempotently(store: Store) -> None:
    summary = store.catalog.load_catalog()
    assert summary.dflash_21 == 21
    before = snapshot(store.engine)
    store.catalog.load_catalog()
    assert snapshot(store.engine) == before
    drafters = {d.repo_id: d for d in store.reads.drafters()}
    dflash_21 = [d for d in drafters.values() if d.in_21]
    assert len(dflash_21) == 21 and all(d.method == "dflash" for d in dflash_21)


def test_catalog_find_qwen3_8b(store: Store) -> None:
    store.catalog.load_catalog()
    checkpoint, rows = find_for_checkpoint(store, "Qwen/Qwen3-8B")
    by_drafter = {r.drafter_repo_id: r for r in rows}
    assert by_drafter["z-lab/Qwen3-8B-DFlash-b16"].verdict == "exact"
    assert rows[0].verdict == "exact"
    assert "z-lab/Qwen3-4B-DFlash-b16" not in by_drafter or by_drafter["z-lab/Qwen3-4B-DFlash-b16"].verdict == "incompatible"
