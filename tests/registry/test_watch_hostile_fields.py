"""One hostile repo never fails another repo's unit of work (issue 21 item 6), one case per field the watcher
reads, against the fake Hub.

The hostile drafter is published by anyone (found by the `speculators` tag) or in a watched org, and named like
the next Qwen release's drafter, so that its content meets that release's unit (name matching, the drafted
index, successors). Real speculators checkpoints carry local paths as their verifier
(`speculators_config.verifier.name_or_path: "/home/user/models/Qwen3-8B"`): a local path is "target unknown".
Whatever the hostile repo holds, the next release is announced with its base upgrade, its drafter is released
and the lag closes; the only repo with failures on record is the hostile one.
"""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from registry.domain import names
from registry.hub import HubClient
from registry.reports import lag_table, upgrade_table
from registry.store import Store
from registry.watch.queries import DRAFTER_QUERIES
from registry.watch.poller import Watcher
from tests.fakehub.scenario import Scenario
from tests.fakehub.server import FakeHub
from tests.fakehub.state import readme_with_card, tiny_safetensors

ORGS = ["Qwen", "z-lab", "meta-llama", "acme-labs"]
DATA = Path(__file__).resolve().parent.parent / "data"
SPECULATORS = json.loads((DATA / "eagle3" / "speculators-qwen3" / "config.json").read_text())


def speculators_config(verifier: Any = "Qwen/Qwen3-8B", **changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(SPECULATORS)
    config["speculators_config"]["verifier"]["name_or_path"] = verifier
    config.update(changes)
    return config


def encoded(value: Any) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


# case -> (config.json content, card base_model or None, malformations of the fake Hub's answers)
CASES: dict[str, tuple[Any, Any, tuple[str, ...]]] = {
    "verifier_local_path": (speculators_config("/home/user/models/Qwen3-8B"), None, ()),
    "verifier_relative_path": (speculators_config("./models/Qwen3-8B"), None, ()),
    "verifier_windows_path": (speculators_config("C:\\models\\Qwen3-8B"), None, ()),
    "verifier_url": (speculators_config("https://huggingface.co/Qwen/Qwen3-8B"), None, ()),
    "verifier_too_long": (speculators_config("Qwen/" + "Q" * 300), None, ()),
    "verifier_not_a_string": (speculators_config({"path": "/home/user/models/Qwen3-8B"}), None, ()),
    "verifier_architectures_not_strings": (
        speculators_config(speculators_config={**SPECULATORS["speculators_config"],
                                               "verifier": {"name_or_path": "/x", "architectures": [{"a": 1}]}}),
        None, ()),
    "layer_config_wrong_types": (speculators_config(transformer_layer_config={"hidden_size": "wide",
                                                                              "num_hidden_layers": -3},
                                                    eagle_aux_hidden_state_layer_ids=["a", None]), None, ()),
    "card_base_model_local_path": (speculators_config(None), "/home/user/models/Qwen3-8B", ()),
    "card_base_model_list_of_junk": (speculators_config(None), ["../../etc/passwd", "Qwen/Qwen3-8B/extra"], ()),
    "config_not_json": (b"{\"speculators_config\": ", None, ()),
    "config_a_list": ([1, 2, 3], None, ()),
    "config_deeply_nested": (b"[" * 100_000 + b"]" * 100_000, None, ()),
    "listing_tags_not_strings": (speculators_config("Qwen/Qwen3-8B"), None, ("tags",)),
    "listing_last_modified": (speculators_config("Qwen/Qwen3-8B"), None, ("last_modified",)),
    "created_at": (speculators_config("Qwen/Qwen3-8B"), None, ("created_at",)),
    "config_summary_types": (speculators_config("/home/user/models/Qwen3-8B"), None, ("config_summary",)),
    "repo_id_against_the_naming_rule": (speculators_config("Qwen/Qwen3-8B"), None, ()),
    "private_not_a_boolean": (speculators_config("/home/user/models/Qwen3-8B"), None, ("private",)),
    "file_blob_ids_missing": (speculators_config("/home/user/models/Qwen3-8B"), None, ("blob_ids",)),
    "safetensors_total_negative": (speculators_config("/home/user/models/Qwen3-8B"), None, ("safetensors",)),
}


# Every field as anyone publishes it (found by tag); one case in a watched org's listing, where the fields are the same.
@pytest.mark.parametrize(("case", "publisher"),
                         [(case, "mallory") for case in sorted(CASES)] + [("verifier_local_path", "acme-labs")])
def test_a_hostile_repo_fails_no_other_repo(store: Store, scenario: Scenario, hub: FakeHub, tmp_path: Path,
                                            case: str, publisher: str) -> None:
    config, base_model, malformations = CASES[case]
    client = HubClient(hub.url, None, tmp_path / "cache", timeout=5.0, max_retries=1, backoff_base=0.01,
                       backoff_cap=0.05)
    watcher = Watcher(store, client, ORGS, drafter_queries=DRAFTER_QUERIES)
    assert not watcher.poll_once().errors

    hostile = f"{publisher}/Qwen3.5-27B-speculator.eagle3"  # named like the next release's drafter
    if case == "repo_id_against_the_naming_rule":
        hostile += "."  # the Hub refuses such names; an answer carrying one is hostile
    day = scenario.now + timedelta(days=1)
    card: dict[str, Any] = {"license": "apache-2.0", "library_name": "speculators"}
    if base_model is not None:
        card["base_model"] = base_model
    scenario.state.add_repo(
        hostile, created_at=day, date=day, tags=("speculators", "eagle3", "speculative-decoding"),
        library_name="speculators",
        files={"config.json": encoded(config), "model.safetensors": tiny_safetensors({"fc.weight": (8, 24)}, 7),
               "README.md": readme_with_card(card, "# A drafter\n")})
    if malformations:
        scenario.state.malform(hostile, *malformations)

    reports = [watcher.poll_once()]
    scenario.advance("qwen35_27b_appears")
    reports.append(watcher.poll_once())
    scenario.advance("drafter_for_qwen35_27b")
    reports.append(watcher.poll_once())
    reports.append(watcher.poll_once())  # and every later poll

    failed = {repo_id for report in reports for org in report.orgs for repo_id in org.failed}
    assert failed <= {hostile}
    assert {f.repo_id for f in store.watch_state.watch_failures()} <= {hostile}
    seen = [(e.type, e.subject) for e in store.events.events()]
    assert ("new_checkpoint", "Qwen/Qwen3.5-27B") in seen and ("base_upgrade", "Qwen/Qwen3.5-27B") in seen
    assert ("drafter_released", "z-lab/Qwen3.5-27B-DFlash") in seen and ("lag_closed", "Qwen/Qwen3.5-27B") in seen
    recorded = store.reads.get_drafter(hostile)
    if recorded is not None:  # "target unknown", never a local path or any other non-repo string
        assert all(names.is_repo_id(target) for target, _ in recorded.targets), recorded.targets
    # What `drafters lag` and `lag --upgrades` read still reads.
    today = scenario.now.date()
    assert {r.target_repo_id for r in lag_table(store, today)} >= {"Qwen/Qwen3.5-27B"}
    upgrade_table(store, today)
