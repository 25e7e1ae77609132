"""Base upgrades pair like with like for every vendor's naming (issue 21 item 1), against the fake Hub.

Llama, Gemma and Qwen2.5 name the pretrained release bare (or `-pt`) and the post-trained one `-Instruct` / `-it`;
the instruct card names its pretrained sibling, so the Hub tags it `base_model:finetune:<sibling>` (recorded
`meta-llama/Llama-3.1-8B-Instruct`: `base_model:meta-llama/Llama-3.1-8B`, `base_model:finetune:meta-llama/
Llama-3.1-8B`). That instruct release is the vendor's own release, and the upgrade of the previous instruct
release; the new pretrained sibling is no successor of an instruct model.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from registry.hub import HubClient
from registry.reports import upgrade_table
from registry.store import Store
from registry.watch.poller import Watcher
from tests.fakehub.scenario import DAY_0, LLAMA_31_8B_INSTRUCT_CONFIG, QWEN3_8B_CONFIG, QWEN3_8B_DFLASH_CONFIG
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, dflash_drafter_files, target_files

ORGS = ["meta-llama", "google", "Qwen", "z-lab"]

# (old pretrained, old instruct, new pretrained, new instruct); the new generations are hypothetical releases.
LINES = {
    "llama": ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct",
              "meta-llama/Llama-3.4-8B", "meta-llama/Llama-3.4-8B-Instruct"),
    "gemma": ("google/gemma-3-12b-pt", "google/gemma-3-12b-it", "google/gemma-4-12b-pt", "google/gemma-4-12b-it"),
    "qwen2.5": ("Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.6-7B", "Qwen/Qwen2.6-7B-Instruct"),
}


def _release(state: HubState, repo_id: str, day, seed: int, parent: str | None) -> None:  # type: ignore[no-untyped-def]
    config = LLAMA_31_8B_INSTRUCT_CONFIG if "llama" in repo_id else QWEN3_8B_CONFIG
    card = {"library_name": "transformers", "license": "other", "pipeline_tag": "text-generation"}
    if parent is not None:
        card["base_model"] = parent
    state.add_repo(repo_id, created_at=day, date=day + timedelta(hours=1),
                   files=target_files(config, weight_seed=seed, card_data=card),
                   pipeline_tag="text-generation", library_name="transformers")


@pytest.mark.parametrize("line", sorted(LINES))
def test_the_instruct_release_succeeds_the_instruct_release_and_the_pretrained_one_nothing(
    store: Store, tmp_path: Path, line: str
) -> None:
    old_pt, old_it, new_pt, new_it = LINES[line]
    state = HubState()
    _release(state, old_pt, DAY_0 - timedelta(days=300), 1, None)
    _release(state, old_it, DAY_0 - timedelta(days=300), 2, old_pt)
    drafter = f"z-lab/{old_it.split('/')[1]}-DFlash"
    state.add_repo(drafter, created_at=DAY_0 - timedelta(days=30), date=DAY_0 - timedelta(days=30),
                   files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 9), tags=("dflash",),
                   card_data={"license": "mit", "base_model": old_it}, library_name="transformers")
    with FakeHub(state) as hub:
        client = HubClient(hub.url, None, tmp_path / "cache", timeout=5.0, max_retries=1, backoff_base=0.01)
        watcher = Watcher(store, client, ORGS)
        assert not watcher.poll_once().errors
        # The recorded instruct release is the vendor's own release, not somebody's finetune.
        assert store.reads.get_checkpoint(old_it).kind == "base"

        day = DAY_0 + timedelta(days=10)
        _release(state, new_pt, day, 3, None)
        _release(state, new_it, day + timedelta(hours=2), 4, new_pt)
        report = watcher.poll_once()
    assert not report.errors
    released = {e.subject: e for e in report.events if e.type == "new_checkpoint"}
    assert released[new_it].payload["kind"] == "base" and released[new_it].payload["message"].startswith(
        f"new base checkpoint {new_it}")
    upgrades = [(e.subject, e.payload["predecessors"]) for e in report.events if e.type == "base_upgrade"]
    assert upgrades == [(new_it, [old_it])]
    # `drafters lag --upgrades` pairs the same way.
    rows = upgrade_table(store, (day + timedelta(days=5)).date())
    assert [(r.successor_repo_id, r.predecessor_repo_id, r.open) for r in rows] == [(new_it, old_it, True)]


def _drafted(state: HubState, target: str, seed: int) -> None:
    drafter = f"z-lab/{target.split('/')[1]}-DFlash"
    state.add_repo(drafter, created_at=DAY_0 - timedelta(days=30), date=DAY_0 - timedelta(days=30),
                   files=dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, seed), tags=("dflash",),
                   card_data={"license": "mit", "base_model": target}, library_name="transformers")


def test_the_alert_and_the_upgrades_table_pair_by_one_rule(store: Store, tmp_path: Path) -> None:
    """Issue 28 item 3. Kimi-K2.5's card names Kimi-K2-Base (continual pretraining atop it), so the Hub tags it
    `base_model:finetune:moonshotai/Kimi-K2-Base`: the vendor's post-trained upgrade of Kimi-K2-Instruct. Kimi-K3.1-Pro
    upgrades Kimi-K3; Kimi-K2.7-Code, a code variant, upgrades nothing. The alert and the table agree on each."""
    state = HubState()
    old_day = DAY_0 - timedelta(days=300)
    _release(state, "moonshotai/Kimi-K2-Base", old_day, 1, None)
    _release(state, "moonshotai/Kimi-K2-Instruct", old_day, 2, "moonshotai/Kimi-K2-Base")
    _release(state, "moonshotai/Kimi-K2.6", old_day, 3, None)
    _release(state, "moonshotai/Kimi-K3", old_day, 4, None)
    for seed, target in enumerate(("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.6", "moonshotai/Kimi-K3")):
        _drafted(state, target, 20 + seed)
    with FakeHub(state) as hub:
        client = HubClient(hub.url, None, tmp_path / "cache", timeout=5.0, max_retries=1, backoff_base=0.01)
        watcher = Watcher(store, client, ["moonshotai", "z-lab"])
        assert not watcher.poll_once().errors
        day = DAY_0 + timedelta(days=10)
        _release(state, "moonshotai/Kimi-K2.5", day, 5, "moonshotai/Kimi-K2-Base")
        _release(state, "moonshotai/Kimi-K2.7-Code", day, 6, None)
        _release(state, "moonshotai/Kimi-K3.1-Pro", day, 7, None)
        report = watcher.poll_once()
    assert not report.errors
    assert store.reads.get_checkpoint("moonshotai/Kimi-K2.5").kind == "base"  # the vendor's own, not a finetune
    alerted = sorted((e.subject, tuple(e.payload["predecessors"])) for e in report.events if e.type == "base_upgrade")
    expected = [("moonshotai/Kimi-K2.5", ("moonshotai/Kimi-K2-Instruct",)),
                ("moonshotai/Kimi-K3.1-Pro", ("moonshotai/Kimi-K3",))]
    assert alerted == expected
    rows = upgrade_table(store, (day + timedelta(days=5)).date())
    # The table also shows Kimi-K3 (recorded at the first poll, so never announced) as the upgrade of Kimi-K2.6.
    assert sorted((r.successor_repo_id, (r.predecessor_repo_id,)) for r in rows) == sorted(
        [*expected, ("moonshotai/Kimi-K3", ("moonshotai/Kimi-K2.6",))])
