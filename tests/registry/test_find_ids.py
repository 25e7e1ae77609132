"""`drafters find` takes ids as users type them (issue 28 item 6), against the fake Hub.

Any case (the Hub's ids are case-insensitive), a Hub URL, a bare name, "did you mean"; an id the registry does not
hold is looked up on the Hub once and its card's base_model chain (as the Hub tags it: `base_model:quantized:…`)
followed to a checkpoint the registry holds, whose drafters answer, labelled. Offline: the Hub cannot be reached.
The catalog's caveats (`notes`) are printed wherever the pair is (find, check, --json).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.fakehub.scenario import DAY_0, QWEN3_8B_CONFIG, QWEN3_8B_FP8_CONFIG
from tests.fakehub.server import FakeHub
from tests.fakehub.state import HubState, target_files
from tests.support.cli import drafters

QWEN3_8B_NOTE = "non-thinking only"  # the catalog's caveat of z-lab/Qwen3-8B-DFlash-b16


def _derivatives() -> HubState:
    """Derivatives of Qwen/Qwen3-8B as operators serve it, with the cards (and so the tags) their publishers write."""
    state = HubState()
    day = DAY_0 - timedelta(days=20)
    card = {"library_name": "transformers", "license": "apache-2.0", "pipeline_tag": "text-generation"}
    state.add_repo("RedHatAI/Qwen3-8B-FP8-dynamic", created_at=day, date=day,
                   files=target_files(QWEN3_8B_FP8_CONFIG, weight_seed=31, card_data={
                       **card, "base_model": "Qwen/Qwen3-8B", "base_model_relation": "quantized"}),
                   library_name="transformers", pipeline_tag="text-generation")
    state.add_repo("someone/Qwen3-8B-abliterated", created_at=day, date=day,
                   files=target_files(QWEN3_8B_CONFIG, weight_seed=32,
                                      card_data={**card, "base_model": "Qwen/Qwen3-8B"}),
                   library_name="transformers", pipeline_tag="text-generation")
    state.add_repo("someone/Qwen3-8B-abliterated-GGUF", created_at=day, date=day,
                   files={"Qwen3-8B-abliterated-Q4_K_M.gguf": b"GGUF" + bytes(64),
                          "README.md": b"---\nbase_model: someone/Qwen3-8B-abliterated\n---\n"})
    state.add_repo("someone/scratch-model", created_at=day, date=day,
                   files=target_files(QWEN3_8B_CONFIG, weight_seed=33, card_data=card))
    return state


@pytest.fixture
def loaded(db_env: dict[str, str]) -> Iterator[tuple[dict[str, str], FakeHub]]:
    with FakeHub(_derivatives()) as hub:
        env = {**db_env, "DRAFTERS_HUB_ENDPOINT": hub.url}
        assert drafters("catalog", "load", env=env).returncode == 0
        yield env, hub


def _find_json(env: dict[str, str], *args: str) -> dict:
    result = drafters("find", *args, "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_ids_in_any_case_as_urls_and_bare_names_need_no_hub(loaded: tuple[dict[str, str], FakeHub]) -> None:
    env, hub = loaded
    hub.clear_requests()
    for typed, how in (("google/gemma-4-12b-it", "case"), ("https://huggingface.co/Qwen/Qwen3-8B", "url"),
                       ("hf.co/Qwen/Qwen3-8B/tree/main", "url"), ("Qwen3-8B", "name")):
        found = _find_json(env, typed)
        assert (found["asked"], found["resolved_by"], found["derived_from"]) == (typed, how, None)
        assert found["checkpoint"]["repo_id"] in ("google/gemma-4-12B-it", "Qwen/Qwen3-8B") and found["drafters"]
    assert hub.requests == []  # held by the registry: nothing asked
    table = drafters("find", "qwen/qwen3-8b", env=env)
    assert table.returncode == 0 and "qwen/qwen3-8b is Qwen/Qwen3-8B" in table.stdout
    assert "z-lab/Qwen3-8B-DFlash-b16" in table.stdout and f"note: {QWEN3_8B_NOTE}" in table.stdout
    # A near miss: the registry's nearest ids, and no advice to load a catalog that is loaded.
    missed = drafters("find", "Qwen3.5-28B", env=env)
    assert missed.returncode == 1 and "did you mean Qwen/Qwen3.5-27B" in missed.stderr
    assert "catalog load" not in missed.stderr and len(missed.stderr.strip().splitlines()) == 1


def test_a_quantized_derivative_is_answered_for_its_base(loaded: tuple[dict[str, str], FakeHub]) -> None:
    env, hub = loaded
    hub.clear_requests()
    found = _find_json(env, "RedHatAI/Qwen3-8B-FP8-dynamic")
    assert [r.path for r in hub.requests] == ["/api/models/RedHatAI/Qwen3-8B-FP8-dynamic"]  # asked once
    assert found["checkpoint"]["repo_id"] == "Qwen/Qwen3-8B" and found["resolved_by"] == "base_model"
    derived = found["derived_from"]
    assert (derived["repo_id"], derived["relation"], derived["base"]) == (
        "RedHatAI/Qwen3-8B-FP8-dynamic", "quantized", "Qwen/Qwen3-8B")
    assert derived["note"] == ("for the base Qwen/Qwen3-8B; this repo is a quantized derivative: acceptance usually "
                               "drops, measure it")
    rows = {r["drafter_repo_id"]: r for r in found["drafters"]}
    assert rows["z-lab/Qwen3-8B-DFlash-b16"]["notes"].startswith(QWEN3_8B_NOTE)
    table = drafters("find", "https://huggingface.co/RedHatAI/Qwen3-8B-FP8-dynamic", env=env).stdout
    assert derived["note"] in " ".join(table.split()) and "drafters for Qwen/Qwen3-8B" in table


def test_a_chain_of_derivatives_is_followed_and_its_hops_named(loaded: tuple[dict[str, str], FakeHub]) -> None:
    env, _ = loaded
    derived = _find_json(env, "someone/Qwen3-8B-abliterated-GGUF")["derived_from"]
    assert derived["chain"] == [["someone/Qwen3-8B-abliterated-GGUF", "quantized"],
                                ["someone/Qwen3-8B-abliterated", "finetune"]]
    assert derived["note"].endswith("via someone/Qwen3-8B-abliterated (finetune)")
    # On the Hub but with no base the registry holds, or not on the Hub at all: said, exit 1, one line.
    for typed, says in (("someone/scratch-model", "names no base model"), ("nobody/nothing", "the Hub has no model")):
        result = drafters("find", typed, env=env)
        assert result.returncode == 1 and says in result.stderr and "not in the registry" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_offline_find_says_the_hub_cannot_be_reached(db_env: dict[str, str]) -> None:
    env = {**db_env, "DRAFTERS_HUB_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    empty = drafters("find", "RedHatAI/Qwen3-8B-FP8-dynamic", env=env)
    assert empty.returncode == 1 and "the Hub cannot be reached" in empty.stderr
    assert "catalog load" in empty.stderr  # an empty registry: say how to fill it
    assert drafters("catalog", "load", env=env).returncode == 0
    offline = drafters("find", "RedHatAI/Qwen3-8B-FP8-dynamic", env=env)
    assert offline.returncode == 1 and "the Hub cannot be reached" in offline.stderr
    assert "catalog load" not in offline.stderr and "Traceback" not in offline.stderr


def test_check_prints_the_catalogs_caveat(db_env: dict[str, str]) -> None:
    assert drafters("catalog", "load", env=db_env).returncode == 0
    pair = ("z-lab/Qwen3-8B-DFlash-b16", "Qwen/Qwen3-8B")
    checked = json.loads(drafters("check", *pair, "--json", env=db_env).stdout)
    assert checked["drafter_notes"].startswith(QWEN3_8B_NOTE)
    assert f"note: {QWEN3_8B_NOTE}" in drafters("check", *pair, env=db_env).stdout
