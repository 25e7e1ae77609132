"""Verdicts that say what was checked, built-in drafters found by the watcher (issue 28 items 1 and 4), against the
fake Hub with payloads shaped like real ones.

- An upload named after a model, from an account nobody relies on, is never "exact" and never closes a lag, whatever
  its config: empty, minimal (`{"architectures": ["DFlashDraftModel"]}`), junk, a real-shaped name like
  `jmeadlock/GLM-5.3-Flash-DFlash2-JM-FAILED`; a card `base_model` with nothing checked is "declared" and does not
  count either. The target's own publisher declaring it does close the lag, labelled "declared".
- A new checkpoint whose config carries an MTP head is built in: its upgrade is not waiting, and each method's own
  lag stays visible.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from registry.hub import HubClient
from registry.reports import lag_table, upgrade_table
from registry.store import Store
from registry.watch.queries import DRAFTER_QUERIES
from registry.watch.poller import Watcher
from tests.fakehub.scenario import QWEN35_27B_DFLASH_CONFIG, QWEN36_27B_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import dflash_drafter_files, target_files, tiny_safetensors
from tests.support.cli import drafters

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs", "zai-org"]
TARGET = "Qwen/Qwen3.5-27B"
CARD = {"library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}


def make_watcher(store: Store, hub: FakeHub, tmp_path: Path) -> Watcher:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05)
    return Watcher(store, client, ORGS, drafter_queries=DRAFTER_QUERIES)


def upload(scenario: Scenario, repo_id: str, config: dict[str, Any], *, days: int = 2,
           card: dict[str, Any] | None = None, tags: tuple[str, ...] = ("dflash",)) -> None:
    """A drafter repo as uploaders push them: config.json, a small safetensors file, a README card."""
    day = scenario.now + timedelta(days=days)
    files = {"config.json": (json.dumps(config, indent=2) + "\n").encode(),
             "model.safetensors": tiny_safetensors({"fc.weight": (8, 40)}, 7)}
    scenario.state.add_repo(repo_id, created_at=day, date=day + timedelta(hours=1), files=files, tags=tags,
                            card_data={"license": "mit", **(card or {})}, library_name="transformers")


def events(store: Store) -> list[tuple[str, str]]:
    return [(e.type, e.subject) for e in store.events.events()]


def lag_row(store: Store, scenario: Scenario, target: str = TARGET):  # type: ignore[no-untyped-def]
    return {r.target_repo_id: r for r in lag_table(store, scenario.now.date() + timedelta(days=10))}.get(target)


@pytest.fixture
def watched(store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path) -> Watcher:
    """Day 0 recorded, then Qwen/Qwen3.5-27B released (no drafter yet: its lag is open)."""
    watcher = make_watcher(store, hub, tmp_path)
    watcher.poll_once()
    scenario.advance("qwen35_27b_appears")
    assert not watcher.poll_once().errors
    return watcher


# A DSpark config full of junk: the one decisive value matches the target, the rest is noise no check reads.
JUNK_DSPARK = {"architectures": ["DFlashDraftModel"], "hidden_size": 5120, "lorem": "ipsum",
               "dflash_config": {"projector_type": "dspark", "dolor": [1, 2, 3]}, "sit_amet": {"x": None}}
SHAPES = {
    "empty": ({}, None, None),
    "minimal": ({"architectures": ["DFlashDraftModel"]}, None, "unknown"),
    "minimal, card base_model": ({"architectures": ["DFlashDraftModel"]}, {"base_model": TARGET}, "declared"),
    "junk DSpark": (JUNK_DSPARK, None, "structural"),
}


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPES)
def test_an_upload_from_another_account_never_reads_exact_nor_closes_the_lag(
    store: Store, scenario: Scenario, watched: Watcher, database_url: str, shape: str
) -> None:
    config, card, expected = SHAPES[shape]
    drafter = "anyone/Qwen3.5-27B-DFlash"
    upload(scenario, drafter, config, card=card)
    assert not watched.poll_once().errors
    assert ("lag_closed", TARGET) not in events(store)
    row = lag_row(store, scenario)
    verdicts = {v.drafter_repo_id: v.verdict for v in store.reads.verdicts(checkpoint_repo_id=TARGET)}
    if expected is None:  # a config that names no drafting method: no drafter at all, so no lag row either
        assert store.reads.get_drafter(drafter) is None and drafter not in verdicts and row is None
        return
    assert row.open and row.first_drafter_repo_id is None and row.exact_drafters == ()
    assert verdicts[drafter] == expected
    # Shown as such: the lag row names it and why it does not count; `find` prints its verdict.
    [note] = [n for n in row.not_counted if n.startswith(drafter)]
    assert ("anyone is neither Qwen" in note) if expected != "unknown" else ("unknown" in note)
    done = drafters("find", TARGET, "--json", env={"DRAFTERS_DATABASE_URL": database_url})
    assert done.returncode == 0, done.stderr
    [found] = [d for d in json.loads(done.stdout)["drafters"] if d["drafter_repo_id"] == drafter]
    assert found["verdict"] == expected
    if expected == "declared":
        assert found["reasons"][0] == f"declared for {TARGET}; not checked: hidden_size"


def test_a_real_name_only_upload_is_no_declaration(store: Store, scenario: Scenario, watched: Watcher) -> None:
    """`jmeadlock/GLM-5.3-Flash-DFlash2-JM-FAILED` is named after zai-org/GLM-5.3-Flash and declares nothing."""
    glm = {"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 4096,
           "num_hidden_layers": 46, "vocab_size": 151552, "num_attention_heads": 96, "num_key_value_heads": 8}
    day = scenario.now + timedelta(days=1)
    scenario.state.add_repo("zai-org/GLM-5.3-Flash", created_at=day, date=day + timedelta(hours=1),
                            files=target_files(glm, weight_seed=53, card_data=CARD), library_name="transformers",
                            pipeline_tag="text-generation")
    assert not watched.poll_once().errors
    drafter = "jmeadlock/GLM-5.3-Flash-DFlash2-JM-FAILED"
    config = {**QWEN35_27B_DFLASH_CONFIG, "architectures": ["DFlash2DraftModel"], "hidden_size": 4096,
              "vocab_size": 151552, "num_target_layers": 46}
    config["dflash_config"] = {**config["dflash_config"], "target_layer_ids": [1, 12, 23, 34, 45],
                               "mask_token_id": 151329}
    upload(scenario, drafter, config, days=2, tags=("dflash",))
    assert not watched.poll_once().errors
    assert store.reads.get_drafter(drafter).targets == (("zai-org/GLM-5.3-Flash", "name_convention"),)
    [verdict] = store.reads.verdicts(drafter_repo_id=drafter, checkpoint_repo_id="zai-org/GLM-5.3-Flash")
    assert verdict.verdict == "structural" and verdict.reasons[0].startswith("not declared for zai-org/GLM-5.3-Flash")
    assert ("lag_closed", "zai-org/GLM-5.3-Flash") not in events(store)
    row = lag_row(store, scenario, "zai-org/GLM-5.3-Flash")
    assert row.open and row.not_counted == (
        f"{drafter}: structural: named after it, declares no target, and jmeadlock is neither zai-org nor a "
        "catalog or watched publisher",)


def test_the_targets_own_publisher_declaring_it_closes_the_lag_labelled_declared(
    store: Store, scenario: Scenario, watched: Watcher
) -> None:
    drafter = "Qwen/Qwen3.5-27B-DFlash"
    upload(scenario, drafter, {"architectures": ["DFlashDraftModel"]}, card={"base_model": TARGET}, days=3)
    assert not watched.poll_once().errors
    [verdict] = store.reads.verdicts(drafter_repo_id=drafter, checkpoint_repo_id=TARGET)
    assert verdict.verdict == "declared"
    [closed] = [e for e in store.events.events() if e.type == "lag_closed" and e.subject == TARGET]
    assert closed.payload["verdict"] == "declared" and closed.payload["lag_days"] == 3
    assert "declared by its publisher (configs not checked)" in closed.payload["message"]
    row = lag_row(store, scenario)
    assert (row.open, row.lag_days, row.exact_drafters, row.declared_drafters) == (
        False, 3, (), (f"{drafter} (declared)",))


# ---- item 4: built-in drafters found by the watcher -----------------------------------------------------------

def test_a_new_checkpoint_with_an_mtp_head_is_built_in_and_each_methods_lag_stays_visible(
    store: Store, scenario: Scenario, watched: Watcher, database_url: str
) -> None:
    scenario.advance("drafter_for_qwen35_27b")
    watched.poll_once()
    released = scenario.now + timedelta(days=5)
    mtp = {**QWEN36_27B_CONFIG, "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False}
    scenario.state.add_repo("Qwen/Qwen3.7-27B", created_at=released, date=released + timedelta(hours=1),
                            files=target_files(mtp, weight_seed=3727, card_data=CARD), library_name="transformers",
                            pipeline_tag="text-generation", tags=("conversational",))
    assert not watched.poll_once().errors
    assert store.reads.get_checkpoint("Qwen/Qwen3.7-27B").built_in == ("mtp",)
    [upgrade] = [r for r in upgrade_table(store, (released + timedelta(days=28)).date())
                 if r.successor_repo_id == "Qwen/Qwen3.7-27B"]
    assert (upgrade.open, upgrade.lag_days) == (False, 0)  # not "open, 28 days": its own head drafts from day one

    dflash_day = released + timedelta(days=40)
    scenario.state.add_repo("z-lab/Qwen3.7-27B-DFlash", created_at=dflash_day, date=dflash_day + timedelta(hours=1),
                            files=dflash_drafter_files(QWEN35_27B_DFLASH_CONFIG, 37, target_repo="Qwen/Qwen3.7-27B"),
                            card_data={"license": "mit", "base_model": "Qwen/Qwen3.7-27B"}, tags=("dflash",),
                            library_name="transformers")
    assert not watched.poll_once().errors
    today = (dflash_day + timedelta(days=1)).date()
    row = {r.target_repo_id: r for r in lag_table(store, today)}["Qwen/Qwen3.7-27B"]
    assert (row.lag_days, row.open, row.built_in) == (0, False, ("mtp",))
    assert [(m.method, m.first_drafter_repo_id, m.lag_days) for m in row.by_method] == [
        ("mtp", None, 0), ("dflash", "z-lab/Qwen3.7-27B-DFlash", 40)]
    shown = drafters("lag", env={"DRAFTERS_DATABASE_URL": database_url}, columns=250)
    assert shown.returncode == 0, shown.stderr
    [line] = [text for text in shown.stdout.splitlines() if "Qwen3.7-27B" in text]
    assert "built-in MTP" in line and "mtp built in" in line and "dflash 40 d" in line
