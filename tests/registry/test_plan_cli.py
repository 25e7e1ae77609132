"""`drafters plan` explains every catalog pair on this machine, and `drafters fetch` downloads one repo at a sha
from the (fake) Hub into the service's downloads: real processes, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from registry.domain import plan, reliance
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.store import Store
from registry.store import downloads as ledger
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, target_files, utc
from tests.support.cli import drafters


def test_plan_explains_every_catalog_pair(isolated_env: Path) -> None:
    assert drafters("catalog", "load").returncode == 0
    shown = drafters("plan", "--json", env={"DRAFTERS_WORKER_MEMORY_GB": "24", "DRAFTERS_DOWNLOAD_BUDGET_GB": "50"})
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["worker"]["memory_bytes"] == 24 * 2**30
    store = Store.open(f"sqlite:///{isolated_env / 'registry.db'}")
    # Exact pairs, and the catalog's declared ones whose configs it does not give (a catalog publisher's word):
    # measuring reads the configs the verdict could not.
    trusted = store.reads.trusted_publishers()
    exact = {(v.drafter_repo_id, v.checkpoint_repo_id) for v in store.reads.verdicts()
             if reliance.relied_on(v.verdict, v.publisher, v.checkpoint_repo_id, trusted)}
    declared = {(v.drafter_repo_id, v.checkpoint_repo_id) for v in store.reads.verdicts() if v.verdict == "declared"}
    store.engine.dispose()
    pairs = report["pairs"]
    assert {(p["drafter"], p["target"]) for p in pairs} == exact and len(pairs) == len(exact)
    assert declared and declared <= exact and {p["verdict"] for p in pairs} == {"exact", "declared"}
    assert all(p["state"] in plan.STATES and p["reason"] for p in pairs)
    assert sum(report["counts"].values()) == len(pairs)
    # The catalog names revisions the watcher has not read: nothing is ready to download from a made-up ref.
    assert not [p for p in pairs if p["state"] == plan.READY]
    assert {plan.NEEDS_MEMORY, plan.NO_ENGINE, plan.GATED} <= set(report["counts"])
    table = drafters("plan", env={"DRAFTERS_WORKER_MEMORY_GB": "24"})
    assert table.returncode == 0 and "(this worker has 24.0 GiB)" in table.stdout


def test_fetch_downloads_only_what_a_measurement_loads(isolated_env: Path) -> None:
    config = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 8,
              "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 16}
    files = {**target_files(config), "modeling_qwen3.py": b"raise SystemExit(1)\n", "optimizer.pt": b"pickle"}
    state = HubState()
    repo = state.add_repo("tinyorg/fetch-me", files=files, date=utc(2026, 5, 1))
    with FakeHub(state) as hub:
        done = drafters("fetch", "tinyorg/fetch-me", "--revision", repo.sha, env={
            "DRAFTERS_HUB_ENDPOINT": hub.url, "DRAFTERS_DOWNLOAD_BUDGET_GB": "1"})
        refused = drafters("fetch", "tinyorg/fetch-me", "--revision", "main", env={"DRAFTERS_HUB_ENDPOINT": hub.url})
    assert done.returncode == 0, done.stderr
    folder = isolated_env / "downloads" / "tinyorg--fetch-me" / repo.sha
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == [
        "config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    assert refused.returncode == 1 and "pinned to a 40-hex commit sha" in refused.stderr
    store = Store.open(f"sqlite:///{isolated_env / 'registry.db'}")
    row = store.downloads.get_download("tinyorg/fetch-me", repo.sha)
    store.engine.dispose()
    assert row is not None and row.status == ledger.COMPLETE and row.bytes_done == sum(
        len(v) for k, v in files.items() if k in {p.name for p in folder.iterdir()})
