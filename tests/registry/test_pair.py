"""The pair module: one method default, one release rule, one folder reader, one verdict for `drafters check` and
the stored verdicts."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from registry.domain import pair
from registry.domain.records import CheckpointSpec, DrafterSpec, RevisionSpec
from registry.local import read_local_repo, weight_bytes
from registry.store import Store
from tests.support.cli import drafters

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def test_the_method_is_the_recorded_one_else_the_configs_else_a_draft_model() -> None:
    dflash = json.loads((CONFIGS / "z-lab__Qwen3-8B-DFlash-b16.json").read_text())
    plain = json.loads((CONFIGS / "Qwen__Qwen3-4B.json").read_text())
    assert pair.drafter_method(dflash) == "dflash"
    assert pair.drafter_method(plain) == pair.DEFAULT_METHOD == "draft-lm"
    assert pair.drafter_method(plain, "eagle3") == "eagle3"
    assert pair.drafter_method(None) is None and pair.drafter_method(["not", "an", "object"]) is None
    assert pair.Side(config=plain).drafter_method == "draft-lm"


def test_release_dates_never_invent_a_day_for_an_undated_catalog_entry() -> None:
    seen = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert pair.drafter_released(date(2026, 2, 1), "catalog", seen) == date(2026, 2, 1)
    assert pair.drafter_released(None, "hub", seen) == date(2026, 3, 1)
    assert pair.drafter_released(None, "catalog", seen) is None
    assert pair.checkpoint_released(None, seen) == date(2026, 3, 1)
    assert pair.checkpoint_released("2026-01-05", seen) == date(2026, 1, 5)
    assert pair.checkpoint_released(None, None) is None


def test_a_folders_weight_bytes_are_the_tensor_bytes_of_the_shards_it_loads(tmp_path: Path) -> None:
    folder = tmp_path / "sharded"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3", "hidden_size": 8}))
    first = {"a": np.zeros((4, 8), dtype=np.float16), "b": np.zeros(8, dtype=np.float32)}
    second = {"c": np.zeros((3, 8), dtype=np.float16)}
    save_file(first, str(folder / "model-00001-of-00002.safetensors"))
    save_file(second, str(folder / "model-00002-of-00002.safetensors"))
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                  "c": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    # A consolidated copy and pickle weights beside the shards are the same weights again, not more of them.
    save_file(first | second, str(folder / "consolidated.safetensors"))
    (folder / "pytorch_model.bin").write_bytes(b"\0" * 1000)

    parameters_times_dtype = 4 * 8 * 2 + 8 * 4 + 3 * 8 * 2
    assert weight_bytes(folder) == parameters_times_dtype == 144
    assert read_local_repo(folder).weight_bytes == 144
    (folder / "model.safetensors.index.json").unlink()
    (folder / "model-00002-of-00002.safetensors").unlink()
    (folder / "model-00001-of-00002.safetensors").unlink()
    assert weight_bytes(folder) == 144  # no index: every *.safetensors, by its tensors (headers excluded)


QWEN3_8B = json.loads((CONFIGS / "Qwen__Qwen3-8B.json").read_text())
DFLASH_8B = json.loads((CONFIGS / "z-lab__Qwen3-8B-DFlash-b16.json").read_text())


def test_check_judges_a_registered_pair_as_its_stored_verdict_does(store: Store, database_url: str) -> None:
    """`drafters check` read no drafter tokenizer digest: a pair whose tokenizers differ was "exact" there and
    "incompatible" in `drafters find`."""
    store.checkpoints.upsert_checkpoint(CheckpointSpec(repo_id="Qwen/Qwen3-8B", source="hub", kind="base"))
    store.checkpoints.add_checkpoint_revision("Qwen/Qwen3-8B", RevisionSpec(sha="a" * 40, config_raw=json.dumps(QWEN3_8B).encode(),
                                                                 tokenizer_digest="c" * 64))
    store.drafters.upsert_drafter(DrafterSpec(repo_id="z-lab/Qwen3-8B-DFlash-b16", method="dflash", publisher="z-lab",
                                     source="hub", targets=(("Qwen/Qwen3-8B", "catalog"),)))
    store.drafters.add_drafter_revision("z-lab/Qwen3-8B-DFlash-b16", RevisionSpec(
        sha="b" * 40, config_raw=json.dumps(DFLASH_8B).encode(), tokenizer_digest="d" * 64))
    [stored] = store.verdicts.recompute_compatibility(checkpoint_repo_id="Qwen/Qwen3-8B")
    assert stored.verdict == "incompatible"

    checked = drafters("check", "z-lab/Qwen3-8B-DFlash-b16", "Qwen/Qwen3-8B", "--json",
                       env={"DRAFTERS_DATABASE_URL": database_url}, timeout=120)
    assert checked.returncode == 0, checked.stderr
    body = json.loads(checked.stdout)
    assert (body["verdict"], tuple(body["reasons"]), body["method"]) == (stored.verdict, stored.reasons, "dflash")
    assert [c["name"] for c in body["checks"] if c["ok"] is False] == ["tokenizer"]
