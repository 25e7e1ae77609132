"""The drafter's default method is one rule (`registry.domain.pair.method_to_run`), wherever it is decided: the
watcher, the verifier's pre-check and the llama.cpp converter. A name never stands in for a config (issue 36)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from registry.domain import pair
from registry.hub import HubClient
from registry.store import Store
from registry.watch.poller import Watcher
from tests.fakehub.scenario import QWEN3_8B_DFLASH_CONFIG, Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import dflash_drafter_files
from verifier.engines.llamacpp.convert import method_of



def test_a_drafter_without_a_config_is_not_named_a_dflash_by_its_repo_name(
    store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path
) -> None:
    client = HubClient(hub.url, None, tmp_path / "hub-cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05, max_rate_limit_wait=2.0)
    watcher = Watcher(store, client, ["Qwen", "z-lab"])
    watcher.poll_once()
    files = dflash_drafter_files(QWEN3_8B_DFLASH_CONFIG, 5, target_repo="Qwen/Qwen3-8B")
    day = scenario.now + timedelta(days=1)
    scenario.state.add_repo("z-lab/Unreadable-DFlash", created_at=day, date=day, tags=("dflash",),
                            files={k: v for k, v in files.items() if k != "config.json"})
    watcher.poll_once()
    drafter = store.reads.get_drafter("z-lab/Unreadable-DFlash")
    assert drafter is not None
    assert drafter.method == pair.method_to_run(None) == pair.DEFAULT_METHOD
    head = store.reads.drafter_head_revision("z-lab/Unreadable-DFlash")
    assert head is not None and head.config_problem


def test_the_converter_and_the_domain_take_the_same_default(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}')
    assert method_of(tmp_path) == pair.method_to_run({"model_type": "qwen3"}) == pair.DEFAULT_METHOD
    assert method_of(tmp_path, "eagle3") == pair.method_to_run({}, "eagle3") == "eagle3"
