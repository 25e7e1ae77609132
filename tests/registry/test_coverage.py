"""Which engine runs which drafter: layouts from configs and repo ids, the catalog coverage table, and the marks
`drafters find` prints for drafters no engine can run yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from registry.domain.catalog import load_catalog_data
from registry.domain.coverage import (
    DEEPSPEC,
    DEEPSPEC_GEMMA4,
    DFLASH2,
    EAGLE3_ORIGINAL,
    GGUF,
    IN_CHECKPOINT,
    LLAMA_CPP,
    PYTORCH,
    RUNS,
    SPECULATORS,
    Z_LAB,
    coverage,
    layout_of,
)
from tests.support.cli import drafters

EAGLE3_FIXTURES = Path(__file__).resolve().parents[1] / "data" / "eagle3"


@pytest.mark.parametrize(
    ("method", "repo_id", "layout"),
    [
        ("dflash", "z-lab/Qwen3-8B-DFlash-b16", Z_LAB),
        ("dflash", "modal-labs/Qwen3.5-4B-DFlash", Z_LAB),
        ("dflash", "RedHatAI/Qwen3-8B-speculator.dflash", SPECULATORS),
        ("dspark", "deepseek-ai/dspark_qwen3_8b_block7", DEEPSPEC),
        ("dflash", "RedHatAI/Mistral-Small-4-119B-2603.dflash", SPECULATORS),
        ("dflash", "deepseek-ai/dflash_qwen3_4b_block7", DEEPSPEC),
        ("dflash", "Lucebox/gemma-4-31B-it-DFlash-GGUF", GGUF),
        ("dflash2", "z-lab/Qwen3.8-27B-DFlash2", DFLASH2),
        ("dspark", "deepseek-ai/DeepSeek-V4-Flash-DSpark", IN_CHECKPOINT),
        ("eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", EAGLE3_ORIGINAL),
        ("eagle3", "RedHatAI/Qwen3-8B-speculator.eagle3", SPECULATORS),
        ("eagle3", "deepseek-ai/eagle3_qwen3_8b_ttt7", DEEPSPEC),
        ("eagle3", "deepseek-ai/eagle3_gemma4_12b_ttt7", DEEPSPEC_GEMMA4),
    ],
)
def test_layout_from_the_repo_id_when_no_config_is_known(method: str, repo_id: str, layout: str) -> None:
    assert layout_of(method, None, repo_id) == layout


def test_a_config_outranks_the_repo_id() -> None:
    config = json.loads((EAGLE3_FIXTURES / "speculators-llama" / "config.json").read_text())
    assert layout_of("eagle3", config, "someone/renamed-head") == SPECULATORS
    assert coverage("eagle3", config, "someone/renamed-head").engines[0] == PYTORCH


def test_both_eagle3_layouts_run_in_pytorch_and_unbuilt_ones_run_nowhere() -> None:
    assert coverage("eagle3", None, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B").engines == (PYTORCH, LLAMA_CPP)
    assert PYTORCH in coverage("eagle3", None, "RedHatAI/Qwen3-8B-speculator.eagle3").engines
    assert coverage("dflash2", None, "z-lab/Qwen3.8-27B-DFlash2").engines == (PYTORCH, LLAMA_CPP)
    assert coverage("dflash2", None, "z-lab/Qwen3.8-27B-DFlash2-GGUF").engines == (LLAMA_CPP,)
    nowhere = coverage("eagle3", None, "deepseek-ai/eagle3_gemma4_12b_ttt7")
    assert not nowhere.runnable
    assert nowhere.note() == "no engine runs eagle3 drafters in the deepspec-gemma4 layout yet"


def test_every_catalog_method_runs_somewhere() -> None:
    by_method: dict[str, set[str]] = {}
    for drafter in load_catalog_data().drafters:
        by_method.setdefault(drafter.method, set()).update(coverage(drafter.method, drafter.config, drafter.repo_id).engines)
    assert by_method["eagle3"] >= {PYTORCH, LLAMA_CPP}
    assert by_method["dflash"] >= {PYTORCH, LLAMA_CPP}
    assert PYTORCH in by_method["gemma4-assistant"]
    assert PYTORCH in by_method["dflash2"]


def test_the_tables_match_what_the_engines_implement() -> None:
    pytest.importorskip("torch")
    from verifier.engines.llamacpp.engine import SPEC_TYPES
    from verifier.methods import METHOD_MODULES

    assert {method for method, _ in RUNS[PYTORCH]} <= set(METHOD_MODULES)
    assert {method for method, _ in RUNS[LLAMA_CPP]} <= set(SPEC_TYPES)


def test_catalog_coverage_command() -> None:
    shown = drafters("catalog", "coverage", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = {r["drafter"]: r for r in json.loads(shown.stdout)["items"]}
    separate = [d.repo_id for d in load_catalog_data().drafters if not d.built_in]
    assert sorted(rows) == sorted(separate)  # an MTP head or a DSpark checkpoint is nothing an engine pairs
    assert "Qwen/Qwen3.5-27B" not in rows and "deepseek-ai/DeepSeek-V4-Flash-DSpark" not in rows
    assert rows["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]["engines"] == [PYTORCH, LLAMA_CPP]
    assert rows["RedHatAI/Qwen3-8B-speculator.eagle3"]["layout"] == SPECULATORS
    table = drafters("catalog", "coverage")
    assert table.returncode == 0, table.stderr
    assert "runnable: pytorch" in table.stdout and "✓" in table.stdout


def test_find_marks_drafters_no_engine_runs(database_url: str) -> None:
    env = {"DRAFTERS_DATABASE_URL": database_url}
    assert drafters("catalog", "load", env=env).returncode == 0
    found = drafters("find", "Qwen/Qwen3-8B", "--json", env=env)
    assert found.returncode == 0, found.stderr
    rows = {r["drafter_repo_id"]: r for r in json.loads(found.stdout)["drafters"]}
    assert PYTORCH in rows["RedHatAI/Qwen3-8B-speculator.eagle3"]["engines"]
    assert rows["deepseek-ai/dspark_qwen3_8b_block7"]["engines"] == [PYTORCH, LLAMA_CPP]
    assert rows["RedHatAI/Qwen3-8B-speculator.dflash"]["engines"] == [PYTORCH]
    table = drafters("find", "Qwen/Qwen3-8B", env=env)
    assert "z-lab/Qwen3-8B-DFlash-b16" in table.stdout
    assert rows["deepseek-ai/eagle3_qwen3_8b_ttt7"]["engines"] == [PYTORCH]
    assert "no engine runs eagle3 drafters in the deepspec layout" not in table.stdout
    found = drafters("find", "Qwen/Qwen3.8-27B", "--json", env=env)
    rows = {r["drafter_repo_id"]: r for r in json.loads(found.stdout)["drafters"]}
    assert rows["z-lab/Qwen3.8-27B-DFlash2"]["engines"] == [PYTORCH, LLAMA_CPP]
    assert rows["z-lab/Qwen3.8-27B-DFlash2-GGUF"]["engines"] == [LLAMA_CPP]
    table = drafters("find", "Qwen/Qwen3.8-27B", env=env)
    assert "no engine runs dflash2" not in table.stdout
