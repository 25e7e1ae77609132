"""The packaged catalog against the reference material (drafters.md, hub-protocol.md §9), and the loader's
refusal of malformed files."""

from __future__ import annotations

import copy
import json
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import registry
from registry.domain.catalog import METHODS, Catalog, CatalogDrafter, CatalogError, load_catalog_data, parse_catalog
from registry.domain.lag import target_lag

PACKAGED = Path(registry.__file__).parent / "data" / "catalog.json"
GiB = 2**30


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog_data()


def drafter(catalog: Catalog, repo_id: str) -> CatalogDrafter:
    (found,) = [d for d in catalog.drafters if d.repo_id == repo_id]
    return found


# drafters.md §2, the DFlash 1 table: (row, drafter, target, drafter date, block size)
DFLASH1_TABLE = [
    (1, "z-lab/Qwen3-4B-DFlash-b16", "Qwen/Qwen3-4B", date(2026, 1, 5), 16),
    (2, "z-lab/Qwen3-8B-DFlash-b16", "Qwen/Qwen3-8B", date(2026, 1, 5), 16),
    (3, "z-lab/Qwen3-Coder-30B-A3B-DFlash", "Qwen/Qwen3-Coder-30B-A3B-Instruct", date(2026, 1, 22), 16),
    # Block 10: its card serves it with num_speculative_tokens 9 (issue 28).
    (4, "z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat", "meta-llama/Llama-3.1-8B-Instruct", date(2026, 2, 5), 10),
    (5, "z-lab/gpt-oss-20b-DFlash", "openai/gpt-oss-20b", date(2026, 2, 18), 8),
    (6, "z-lab/gpt-oss-120b-DFlash", "openai/gpt-oss-120b", date(2026, 3, 10), None),
    (7, "z-lab/Qwen3-Coder-Next-DFlash", "Qwen/Qwen3-Coder-Next", date(2026, 3, 10), None),
    (8, "z-lab/Qwen3.5-4B-DFlash", "Qwen/Qwen3.5-4B", date(2026, 3, 10), 16),
    (9, "z-lab/Qwen3.5-9B-DFlash", "Qwen/Qwen3.5-9B", date(2026, 3, 10), 16),
    (10, "z-lab/Qwen3.5-27B-DFlash", "Qwen/Qwen3.5-27B", date(2026, 3, 14), 16),
    (11, "z-lab/Qwen3.5-35B-A3B-DFlash", "Qwen/Qwen3.5-35B-A3B", date(2026, 3, 10), 16),
    (12, "z-lab/Qwen3.5-122B-A10B-DFlash", "Qwen/Qwen3.5-122B-A10B", date(2026, 4, 25), 16),
    (13, "z-lab/Qwen3.5-397B-A17B-DFlash", "Qwen/Qwen3.5-397B-A17B", date(2026, 6, 15), 16),
    (14, "z-lab/Qwen3.6-35B-A3B-DFlash", "Qwen/Qwen3.6-35B-A3B", date(2026, 4, 17), 16),
    (15, "z-lab/Qwen3.6-27B-DFlash", "Qwen/Qwen3.6-27B", date(2026, 4, 23), 16),
    (16, "z-lab/Kimi-K2.5-DFlash", "moonshotai/Kimi-K2.5", date(2026, 4, 6), None),
    (17, "z-lab/Kimi-K2.6-DFlash", "moonshotai/Kimi-K2.6", date(2026, 5, 10), None),
    (18, "z-lab/MiniMax-M2.5-DFlash", "MiniMaxAI/MiniMax-M2.5", date(2026, 5, 7), None),
    (19, "z-lab/MiniMax-M2.7-DFlash", "MiniMaxAI/MiniMax-M2.7", date(2026, 5, 10), None),
    # Public by 2026-05-04 (issue 13), earlier than drafters.md's ≈05-08 / ≈05-07.
    (20, "z-lab/gemma-4-31B-it-DFlash", "google/gemma-4-31B-it", date(2026, 5, 4), 16),
    (21, "z-lab/gemma-4-26B-A4B-it-DFlash", "google/gemma-4-26B-A4B-it", date(2026, 5, 4), 16),
    (22, "z-lab/gemma4-12B-it-DFlash", "google/gemma-4-12B-it", date(2026, 6, 1), 16),
]


@pytest.mark.parametrize(("row", "repo_id", "target", "released", "block"), DFLASH1_TABLE)
def test_dflash1_table_rows(
    catalog: Catalog, row: int, repo_id: str, target: str, released: date, block: int | None
) -> None:
    entry = drafter(catalog, repo_id)
    assert entry.method == "dflash"
    assert entry.publisher == "z-lab"
    assert entry.targets == (target,)
    assert entry.released == released
    assert entry.block_size == block
    assert entry.in_21 is (row != 13)


def test_the_21_add_up_as_drafters_md_says(catalog: Catalog) -> None:
    the_21 = [d for d in catalog.drafters if d.in_21]
    assert len(the_21) == 21
    assert sum(1 for d in the_21 if d.family.startswith("Qwen")) == 11
    assert len({d.family for d in the_21}) == 10  # the grouping of drafters.md §2.3
    assert {d.repo_id for d in the_21} | {"z-lab/Qwen3.5-397B-A17B-DFlash"} == {row[1] for row in DFLASH1_TABLE}


def test_in_21_is_only_decided_for_dflash(catalog: Catalog) -> None:
    for entry in catalog.drafters:
        assert (entry.in_21 is None) == (entry.method != "dflash"), entry.repo_id


def test_every_method_is_known_and_every_group_of_the_reference_is_present(catalog: Catalog) -> None:
    ids = {d.repo_id for d in catalog.drafters}
    assert {d.method for d in catalog.drafters} <= set(METHODS)
    expected = {
        "z-lab/Qwen3.8-27B-DFlash2",
        "z-lab/Muse-Glimmer-30B-DFlash2",
        "z-lab/Qwen3.8-27B-DFlash2-GGUF",
        "modal-labs/Qwen3.6-35B-A3B-DFlash",
        "modal-labs/Qwen3.5-122B-A10B-DFlash",
        "deepseek-ai/dspark_qwen3_14b_block7",
        "deepseek-ai/dflash_gemma4_12b_block7",
        "deepseek-ai/eagle3_gemma4_12b_ttt7",
        "deepseek-ai/DeepSeek-V4-Flash-DSpark",
        "deepseek-ai/DeepSeek-V4-Pro-DSpark",
        "google/gemma-4-E2B-it-assistant",
        "google/gemma-4-12B-it-qat-q4_0-unquantized-assistant",
        "RedHatAI/Qwen3-8B-speculator.eagle3",
        "RedHatAI/Mistral-Small-4-119B-2603-speculator.dspark",
        "yuhuili/EAGLE3-Vicuna1.3-13B",
        "lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge",
        "nebius/EAGLE3-gpt-oss-20b",
        "XiaomiMiMo/MiMo-V2.5-Pro-FP4-DFlash",
        "z-lab/GLM-5.1-FP8-DFlash",
    }
    assert expected <= ids
    assert len([i for i in ids if i.startswith("deepseek-ai/") and i.endswith(("_block7", "_ttt7"))]) == 12
    assert len([i for i in ids if i.startswith("modal-labs/")]) == 6
    assert len([i for i in ids if i.startswith("google/") and i.endswith("-assistant")]) == 6


def test_left_out_drafters_are_listed_with_a_reason(catalog: Catalog) -> None:
    listed = " ".join(item.what for item in catalog.not_listed)
    for mention in ("Qwen3-8B-speculator.peagle", "Muse-Glimmer-30B-DFlash2-GGUF"):
        assert mention in listed
    assert all(item.reason and item.source for item in catalog.not_listed)
    assert not any(item.what in {d.repo_id for d in catalog.drafters} for item in catalog.not_listed)


def test_sizes_follow_the_stated_units(catalog: Catalog) -> None:
    assert drafter(catalog, "z-lab/Qwen3-Coder-30B-A3B-DFlash").weight_bytes == round(0.88 * GiB)
    assert drafter(catalog, "z-lab/Qwen3.5-27B-DFlash").weight_bytes == round(3.22 * GiB)
    assert drafter(catalog, "z-lab/gemma4-12B-it-DFlash").weight_bytes == 1_455_000_000
    assert drafter(catalog, "z-lab/Qwen3.5-9B-DFlash").weight_bytes is None  # no size in the table


def test_release_precision_and_notes(catalog: Catalog) -> None:
    qwen35_27b = catalog.target("Qwen/Qwen3.5-27B")
    assert (qwen35_27b.released, qwen35_27b.released_precision) == (date(2026, 2, 25), "approx")
    assert qwen35_27b.released_note == "≈late Feb 2026"
    preview = drafter(catalog, "z-lab/Qwen3.5-27B-DFlash")
    assert preview.released_note == "preview 2026-03-14, final 2026-04-02"
    june = drafter(catalog, "z-lab/gemma4-12B-it-DFlash")
    assert (june.released, june.released_precision) == (date(2026, 6, 1), "month")
    for entry in [*catalog.targets, *catalog.drafters]:
        assert (entry.released is None) == (entry.released_precision is None), entry.repo_id


def test_replaced_in_place_and_gated(catalog: Catalog) -> None:
    assert drafter(catalog, "z-lab/Qwen3.5-122B-A10B-DFlash").replaced_in_place[0].startswith("2026-06-19: ")
    assert drafter(catalog, "z-lab/Qwen3.6-35B-A3B-DFlash").replaced_in_place
    gated = {d.repo_id for d in catalog.drafters if d.gated}
    assert gated == {"z-lab/Kimi-K2.6-DFlash", "z-lab/MiniMax-M2.7-DFlash", "z-lab/GLM-5.1-FP8-DFlash",
                     "z-lab/MiniMax-M2.5-DFlash"}
    assert catalog.target("meta-llama/Llama-3.1-8B-Instruct").gated is True


def test_target_facts_from_hub_protocol(catalog: Catalog) -> None:
    qwen3_8b = catalog.target("Qwen/Qwen3-8B")
    assert qwen3_8b.sha == "b968826d9c46dd6066d109eabc6255188de91218"
    assert qwen3_8b.released == date(2025, 4, 29)
    assert qwen3_8b.config is not None and qwen3_8b.config["tie_word_embeddings"] is False
    assert catalog.target("Qwen/Qwen3-4B").config["tie_word_embeddings"] is True  # type: ignore[index]
    gemma3 = catalog.target("google/gemma-3-12b-it").config
    assert gemma3 is not None and gemma3["text_config"]["hidden_size"] == 3840
    assert catalog.target("deepseek-ai/DeepSeek-V3").config["num_nextn_predict_layers"] == 1  # type: ignore[index]
    assert len(catalog.target("deepseek-ai/DeepSeek-V3").other_shas) == 4
    gemma4 = catalog.target("google/gemma-4-31B-it").config
    assert gemma4 is not None and gemma4["model_type"] == "gemma4"
    assert "implied" in catalog.target("google/gemma-4-31B-it").source


def test_predecessor_bases_are_targets_without_drafters(catalog: Catalog) -> None:
    for repo_id in ("google/gemma-3-12b-it", "deepseek-ai/DeepSeek-V3"):
        catalog.target(repo_id)
        assert catalog.drafters_for(repo_id) == ()


def test_every_drafter_shares_its_targets_family(catalog: Catalog) -> None:
    for entry in catalog.drafters:
        for target in entry.targets:
            assert catalog.target(target).family == entry.family, entry.repo_id


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    return config.get("text_config", config)


def test_drafter_configs_fit_their_targets(catalog: Catalog) -> None:
    """drafters.md §8: hidden size, vocab and layer count of the drafter must match the target's."""
    checked = 0
    for entry in catalog.drafters:
        if entry.config is None:
            continue
        for target_id in entry.targets:
            target_config = catalog.target(target_id).config
            if target_config is None:
                continue
            target_text = _text_config(target_config)
            for key in ("hidden_size", "vocab_size"):
                if key in entry.config and key in target_text:
                    assert entry.config[key] == target_text[key], (entry.repo_id, key)
                    checked += 1
            layer_ids = entry.config.get("dflash_config", {}).get("target_layer_ids")
            if "num_hidden_layers" in target_text and layer_ids:
                assert max(layer_ids) < target_text["num_hidden_layers"], entry.repo_id
                if "num_target_layers" in entry.config:
                    assert entry.config["num_target_layers"] == target_text["num_hidden_layers"], entry.repo_id
                checked += 1
            mask = entry.config.get("dflash_config", {}).get("mask_token_id")
            if mask is not None and "vocab_size" in target_text:
                assert mask < target_text["vocab_size"], entry.repo_id
    assert checked >= 10


def build_target_layer_ids(num_target_layers: int, k: int) -> list[int]:
    """z-lab's default layer selection as drafters.md §2.1 states it."""
    if k == 1:
        return [num_target_layers // 2]
    return [round(1 + i * (num_target_layers - 4) / (k - 1)) for i in range(k)]


def test_z_lab_layer_ids_follow_the_default_selection_and_deepspec_gemma_does_not(catalog: Catalog) -> None:
    with_ids = [
        d
        for d in catalog.drafters
        if d.config and "num_target_layers" in d.config and "target_layer_ids" in d.config.get("dflash_config", {})
    ]
    assert len(with_ids) >= 7
    for entry in with_ids:
        assert entry.config is not None
        ids = entry.config["dflash_config"]["target_layer_ids"]
        assert ids == build_target_layer_ids(entry.config["num_target_layers"], len(ids)), entry.repo_id
    gemma = drafter(catalog, "deepseek-ai/dflash_gemma4_12b_block7").config
    assert gemma is not None
    explicit = gemma["dflash_config"]["target_layer_ids"]
    assert explicit == [5, 17, 29, 41, 46]
    assert all(build_target_layer_ids(n, len(explicit)) != explicit for n in range(len(explicit), 200))


def test_stated_geometry(catalog: Catalog) -> None:
    gpt = drafter(catalog, "z-lab/gpt-oss-20b-DFlash").config
    assert gpt is not None and gpt["block_size"] == 8 and gpt["dflash_config"]["mask_token_id"] == 200000
    gemma = drafter(catalog, "z-lab/gemma-4-31B-it-DFlash").config
    assert gemma is not None and gemma["dflash_config"]["mask_token_id"] == 4
    assert gemma["final_logit_softcapping"] == 30.0
    dspark = drafter(catalog, "deepseek-ai/dspark_qwen3_4b_block7").config
    assert dspark is not None and dspark["dflash_config"]["projector_type"] == "dspark"
    assert dspark["architectures"] == ["DFlashDraftModel"] and dspark["block_size"] == 7
    first_revision = drafter(catalog, "z-lab/Qwen3.6-35B-A3B-DFlash").config
    assert first_revision is not None and first_revision["num_hidden_layers"] == 8


def _first_z_lab_dflash(catalog: Catalog, target: str) -> date:
    return min(d.released for d in catalog.drafters_for(target) if d.publisher == "z-lab" and d.released)


@pytest.mark.parametrize(
    ("target", "low", "high"),
    [
        # drafters.md §9, "Drafter lag": the stated lag, as a range of days
        ("Qwen/Qwen3.6-35B-A3B", 1, 1),
        ("Qwen/Qwen3.6-27B", 1, 1),
        ("Qwen/Qwen3.5-4B", 7, 21),
        ("Qwen/Qwen3.5-27B", 7, 21),
        ("Qwen/Qwen3.5-122B-A10B", 50, 70),
        ("Qwen/Qwen3.5-397B-A17B", 110, 130),
        ("google/gemma-4-31B-it", 30, 40),
        ("openai/gpt-oss-20b", 190, 205),
        ("moonshotai/Kimi-K2.5", 65, 72),  # released 2026-01-27 (issue 28), drafter 2026-04-06
        ("meta-llama/Llama-3.1-8B-Instruct", 530, 580),
    ],
)
def test_catalog_dates_give_the_lags_of_drafters_md(catalog: Catalog, target: str, low: int, high: int) -> None:
    released = catalog.target(target).released
    assert released is not None
    lag = target_lag(released, [_first_z_lab_dflash(catalog, target)], today=date(2026, 10, 1))
    assert not lag.open and low <= lag.days <= high


def test_month_precision_can_put_a_drafter_before_its_target(catalog: Catalog) -> None:
    gemma_12b = catalog.target("google/gemma-4-12B-it")
    assert gemma_12b.released is not None
    lag = target_lag(gemma_12b.released, [_first_z_lab_dflash(catalog, gemma_12b.repo_id)], date(2026, 10, 1))
    assert lag.days == 0 and lag.drafter_before_target


def test_default_file_is_found_through_the_package(catalog: Catalog) -> None:
    assert load_catalog_data(PACKAGED) == catalog


# ------------------------------------------------------------------------------------------- malformed files


def _document() -> dict[str, Any]:
    return json.loads(PACKAGED.read_text(encoding="utf-8"))


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _drafter_index(document: dict[str, Any], repo_id: str) -> int:
    return next(i for i, d in enumerate(document["drafters"]) if d["repo_id"] == repo_id)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("method", "medusa", "not one of"),
        ("repo_id", "Qwen3-8B-DFlash-b16", "org/name"),
        ("released", "2026-02-30", "not a calendar date"),
        ("released", "05/01/2026", "YYYY-MM-DD"),
        ("released_precision", "week", "not one of"),
        ("targets", ["Qwen/Qwen9-8B"], "not in the catalog's targets"),
        ("targets", ["Qwen/Qwen3-8B", "Qwen/Qwen3-8B"], "twice"),
        ("in_21", None, "true/false for method 'dflash'"),
        ("block_size", 0, "positive integer"),
        ("weight_bytes", "1 GiB", "positive integer"),
        ("gated", "yes", "true, false or null"),
        ("sha", "9b41424", "40-hex"),
        ("replaced_in_place", ["June: retrained"], "YYYY-MM-DD: what changed"),
        ("config", [1, 2], "JSON object"),
        ("colour", "blue", "unknown field"),
    ],
)
def test_bad_drafter_field_names_entry_and_field(tmp_path: Path, field: str, value: Any, message: str) -> None:
    document = _document()
    index = _drafter_index(document, "z-lab/Qwen3-8B-DFlash-b16")
    document["drafters"][index][field] = value
    with pytest.raises(CatalogError, match=message) as caught:
        load_catalog_data(_write(tmp_path, document))
    assert caught.value.entry.startswith(f"drafters[{index}]")
    assert caught.value.field == field


def test_month_precision_must_be_the_first_of_the_month(tmp_path: Path) -> None:
    document = _document()
    index = _drafter_index(document, "z-lab/gemma4-12B-it-DFlash")
    document["drafters"][index]["released"] = "2026-06-15"
    with pytest.raises(CatalogError, match="first day") as caught:
        load_catalog_data(_write(tmp_path, document))
    assert caught.value.field == "released"


def test_in_21_refused_on_other_methods(tmp_path: Path) -> None:
    document = _document()
    index = _drafter_index(document, "RedHatAI/Qwen3-8B-speculator.eagle3")
    document["drafters"][index]["in_21"] = False
    with pytest.raises(CatalogError, match="null otherwise") as caught:
        load_catalog_data(_write(tmp_path, document))
    assert caught.value.field == "in_21"


def test_missing_required_field(tmp_path: Path) -> None:
    document = _document()
    del document["targets"][0]["family"]
    with pytest.raises(CatalogError, match="missing") as caught:
        load_catalog_data(_write(tmp_path, document))
    assert (caught.value.entry, caught.value.field) == ("targets[0]", "family")


@pytest.mark.parametrize("section", ["targets", "drafters"])
def test_duplicate_repo_ids(tmp_path: Path, section: str) -> None:
    document = _document()
    document[section].append(copy.deepcopy(document[section][1]))
    with pytest.raises(CatalogError, match="duplicate") as caught:
        load_catalog_data(_write(tmp_path, document))
    assert caught.value.field == "repo_id"
    assert document[section][1]["repo_id"] in caught.value.entry


def test_a_drafter_may_not_also_be_a_target(tmp_path: Path) -> None:
    document = _document()
    target = copy.deepcopy(document["targets"][0])
    target.update(repo_id="z-lab/Qwen3-8B-DFlash-b16", org="z-lab")
    document["targets"].append(target)
    with pytest.raises(CatalogError, match="also listed as a target"):
        load_catalog_data(_write(tmp_path, document))


def test_target_org_must_match_its_repo_id(tmp_path: Path) -> None:
    document = _document()
    document["targets"][0]["org"] = "qwen"
    with pytest.raises(CatalogError, match="not the org") as caught:
        load_catalog_data(_write(tmp_path, document))
    assert caught.value.field == "org"


def test_not_valid_json(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text('{"schema_version": 1, "targets": [', encoding="utf-8")
    with pytest.raises(CatalogError, match=r"not valid JSON: .* line 1"):
        load_catalog_data(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot be read"):
        load_catalog_data(tmp_path / "nope.json")


def test_wrong_schema_version_and_shape(tmp_path: Path) -> None:
    document = _document()
    document["schema_version"] = 2
    with pytest.raises(CatalogError, match="schema_version"):
        load_catalog_data(_write(tmp_path, document))
    with pytest.raises(CatalogError, match="must be a JSON object"):
        load_catalog_data(_write(tmp_path, [document]))  # type: ignore[arg-type]
    document = _document()
    document["drafters"] = {"z-lab/x": {}}
    with pytest.raises(CatalogError, match="must be a list"):
        load_catalog_data(_write(tmp_path, document))


def test_a_bad_file_leaves_the_file_untouched(tmp_path: Path) -> None:
    document = _document()
    document["drafters"][0]["method"] = "medusa"
    path = _write(tmp_path, document)
    before = path.read_bytes()
    with pytest.raises(CatalogError):
        load_catalog_data(path)
    assert path.read_bytes() == before


# ---- corrections of issue 13 ------------------------------------------------------------------------------------

def test_every_entry_keeps_its_source(catalog: Catalog) -> None:
    entries = [*catalog.targets, *catalog.drafters, *catalog.not_listed]
    assert entries and all(e.source.strip() for e in entries)
    raw = json.loads(PACKAGED.read_text())
    assert all(entry.get("source") for section in ("targets", "drafters", "not_listed") for entry in raw[section])


def test_replaced_drafters_say_which_revision_their_facts_describe(catalog: Catalog) -> None:
    replaced_4b = drafter(catalog, "z-lab/Qwen3.5-4B-DFlash")
    assert replaced_4b.replaced_in_place[0].startswith("2026-06-19: ")
    assert replaced_4b.facts_revision and "before 2026-06-19" in replaced_4b.facts_revision
    for repo_id in ("z-lab/Qwen3.5-9B-DFlash", "z-lab/Qwen3.5-27B-DFlash", "z-lab/Qwen3.5-35B-A3B-DFlash"):
        found = drafter(catalog, repo_id)
        assert "6-layer sliding-window" in found.replaced_in_place[0], repo_id
        assert found.facts_revision and "first" in found.facts_revision, repo_id
    assert drafter(catalog, "z-lab/Qwen3.5-27B-DFlash").config["num_hidden_layers"] == 5  # the first revision's


def test_checkpoints_with_a_built_in_drafter_are_marked(catalog: Catalog) -> None:
    full_checkpoints = {d.repo_id for d in catalog.drafters if d.built_in and d.method != "mtp"}
    assert full_checkpoints == {"deepseek-ai/DeepSeek-V4-Flash-DSpark", "deepseek-ai/DeepSeek-V4-Pro-DSpark",
                                "deepseek-ai/DeepSeek-V4-Flash-0731", "XiaomiMiMo/MiMo-V2.5-Pro-FP4-DFlash"}


# Issue 21: the MTP heads that ship inside these targets, each with a public source.
MTP_TARGETS = (
    "Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-9B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-122B-A10B",
    "Qwen/Qwen3.5-397B-A17B", "Qwen/Qwen3.6-35B-A3B", "Qwen/Qwen3.6-27B", "Qwen/Qwen3.8-27B",
    "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro",
    "zai-org/GLM-5.1-FP8", "zai-org/GLM-5.3-Flash",
)
# Issue 21: drafters published since the last import, each with the public page it was read from.
ISSUE_21_DRAFTERS = {
    "incoai/Qwen3.8-27B-DFlash2": ("dflash2", ("Qwen/Qwen3.8-27B",)),
    "incoai/GLM-5.3-Flash-DFlash2": ("dflash2", ("zai-org/GLM-5.3-Flash",)),
    "Inferact/Kimi-K3-DSpark": ("dspark", ("moonshotai/Kimi-K3",)),
    "lightseekorg/kimi-k3-dspark": ("dspark", ("moonshotai/Kimi-K3",)),
    "LithosAI/Kimi-K3.1-Pro-DSpark": ("dspark", ("moonshotai/Kimi-K3.1-Pro",)),
    "Inferact/Kimi-K3.1-Pro-DSpark-preview": ("dspark", ("moonshotai/Kimi-K3.1-Pro",)),
    "novita/kimi-k2.6-dspark": ("dspark", ("moonshotai/Kimi-K2.6",)),
    "nvidia/Kimi-K2.7-Code-DFlash": ("dflash", ("moonshotai/Kimi-K2.7-Code",)),
    "RedHatAI/DeepSeek-V4-Flash-speculator.dflash": ("dflash", ("deepseek-ai/DeepSeek-V4-Flash",)),
    "RedHatAI/gemma-4-26B-A4B-it-speculator.eagle3": ("eagle3", ("google/gemma-4-26B-A4B-it",)),
    "RedHatAI/gemma-4-31B-it-speculator.dspark": ("dspark", ("google/gemma-4-31B-it",)),
    "RedHatAI/gemma-4-31B-it-speculator.dflash2": ("dflash2", ("google/gemma-4-31B-it",)),
    "meta-models/Muse-Glimmer-30B-assistant": ("dflash", ("meta-models/Muse-Glimmer-30B",)),
    "z-lab/Alpamayo-1.5-10B-DFlash": ("dflash", ("z-lab/Alpamayo-1.5-10B",)),
    "z-lab/Alpamayo-R1-10B-DFlash": ("dflash", ("z-lab/Alpamayo-R1-10B",)),
}


def test_issue_21_drafters_are_listed_with_a_public_source(catalog: Catalog) -> None:
    for repo_id, (method, targets) in ISSUE_21_DRAFTERS.items():
        found = drafter(catalog, repo_id)
        assert (found.method, found.targets, found.built_in) == (method, targets, False), repo_id
        assert "https://" in found.source, repo_id
        assert found.in_21 in (None, False), repo_id  # none of them is one of z-lab's 21 DFlash LLM drafters


def test_built_in_mtp_heads_are_their_targets_own(catalog: Catalog) -> None:
    for repo_id in MTP_TARGETS:
        catalog.target(repo_id)
        assert catalog.built_in_methods(repo_id) == ("mtp",), repo_id
        [head] = [d for d in catalog.drafters if d.repo_id == repo_id]
        assert head.targets == (repo_id,) and "https://" in head.source, repo_id
    assert catalog.built_in_methods("deepseek-ai/DeepSeek-V4-Flash-DSpark") == ("dspark",)
    assert catalog.built_in_methods("openai/gpt-oss-20b") == ()


def test_now_public_facts_carry_their_source(catalog: Catalog) -> None:
    assert drafter(catalog, "z-lab/Qwen3.8-27B-DFlash2").block_size == 8
    assert "JonasLoos/Qwen3.8-27B-DFlash2-b32" in drafter(catalog, "z-lab/Qwen3.8-27B-DFlash2").source
    assert drafter(catalog, "RedHatAI/gemma-4-31B-it-speculator.dflash2").block_size == 8
    assert drafter(catalog, "novita/kimi-k2.6-dspark").block_size == 8
    non_commercial = drafter(catalog, "incoai/GLM-5.3-Flash-DFlash2")
    assert non_commercial.license == "cc-by-nc-nd-4.0" and "CC-BY-NC-ND-4.0" in non_commercial.source
    assert drafter(catalog, "nvidia/Kimi-K2.7-Code-DFlash").license == "nvidia-open-model-license"
    assistant = drafter(catalog, "meta-models/Muse-Glimmer-30B-assistant")
    assert assistant.released == catalog.target("meta-models/Muse-Glimmer-30B").released  # released with its base
    # Figures that no public page read here states stay unknown, and say so.
    for repo_id in ("z-lab/gpt-oss-120b-DFlash", "z-lab/Kimi-K2.5-DFlash", "z-lab/Muse-Glimmer-30B-DFlash2"):
        found = drafter(catalog, repo_id)
        notes = found.notes or ""
        assert found.block_size is None and ("not public" in notes or "unknown" in notes), repo_id
    llama = drafter(catalog, "z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat")  # its card: apache-2.0, block 10
    assert (llama.block_size, llama.license) == (10, "apache-2.0") and "num_speculative_tokens 9" in llama.source


def test_no_source_points_at_a_file_outside_the_repository(catalog: Catalog) -> None:
    published = json.loads(resources.files("registry").joinpath("data", "published_acceptance.json").read_text())
    sources = [e["source"] for e in published["entries"]]
    assert sources and all("/work/" not in s and "github.com/z-lab/dflash" in s and "2602.06036" in s
                           for s in sources)
    catalog_sources = [t.source for t in catalog.targets] + [d.source for d in catalog.drafters]
    assert not any("/work/" in s or s.startswith("/") for s in catalog_sources)


def test_built_in_and_license_rules_are_enforced() -> None:
    def document(**drafter_fields: object) -> dict:
        drafter_entry = {"repo_id": "org/Base", "method": "mtp", "publisher": "org", "targets": ["org/Base"],
                         "family": "F", "source": "s", "built_in": True, **drafter_fields}
        target_entry = {"repo_id": "org/Base", "org": "org", "family": "F", "source": "s"}
        return {"schema_version": 1, "targets": [target_entry], "drafters": [drafter_entry], "not_listed": []}

    parsed = parse_catalog(document(license="cc-by-nc-nd-4.0"))
    assert parsed.built_in_methods("org/Base") == ("mtp",) and parsed.drafters_for("org/Base") == ()
    assert parsed.drafters[0].license == "cc-by-nc-nd-4.0"
    with pytest.raises(CatalogError, match="built_in"):
        parse_catalog(document(built_in=False))  # an MTP head is always inside its checkpoint
    with pytest.raises(CatalogError, match="also listed as a target"):
        parse_catalog(document(method="dflash", built_in=False, in_21=False))
    with pytest.raises(CatalogError, match="license"):
        parse_catalog(document(license="CC BY-NC-ND 4.0"))


def test_public_targets_are_filled(catalog: Catalog) -> None:
    expected = {
        "RedHatAI/Mistral-Small-4-119B-2603.dflash": ("mistralai/Mistral-Small-4-119B-2603",),
        "RedHatAI/Mistral-Small-4-119B-2603-speculator.dspark": ("mistralai/Mistral-Small-4-119B-2603",),
        "yuhuili/EAGLE3-DeepSeek-R1-Distill-LLaMA-8B": ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B",),
        "yuhuili/EAGLE3-Vicuna1.3-13B": ("lmsys/vicuna-13b-v1.3",),
        "AQ-MedAI/Ling-Flash-2.0-eagle3": ("inclusionAI/Ling-flash-2.0",),
        "RedHatAI/Qwen3-14B-speculator.eagle3": ("Qwen/Qwen3-14B",),
        "RedHatAI/Qwen3-32B-speculator.eagle3": ("Qwen/Qwen3-32B",),
        "z-lab/Muse-Glimmer-30B-DFlash2": ("meta-models/Muse-Glimmer-30B",),
    }
    for repo_id, targets in expected.items():
        assert drafter(catalog, repo_id).targets == targets, repo_id
    assert not any("Qwen3-14B" in n.what or "Qwen3-32B" in n.what for n in catalog.not_listed)


def test_weight_bytes_from_rounded_figures_are_marked_approximate(catalog: Catalog) -> None:
    sized = [d for d in catalog.drafters if d.weight_bytes is not None]
    assert sized and all(d.weight_bytes_approx for d in sized)
    assert drafter(catalog, "z-lab/Qwen3.5-27B-DFlash").weight_bytes == round(3.22 * GiB)


def test_published_block_sizes_are_filled_and_unpublished_ones_say_so(catalog: Catalog) -> None:
    assert drafter(catalog, "Lucebox/gemma-4-31B-it-DFlash-GGUF").block_size == 16  # stated on its card
    assert "block size" in drafter(catalog, "Lucebox/gemma-4-31B-it-DFlash-GGUF").source
    muse = drafter(catalog, "z-lab/Muse-Glimmer-30B-DFlash2")
    assert muse.block_size is None and muse.notes and "block size not public" in muse.notes
    assert catalog.target("meta-models/Muse-Glimmer-30B").family == muse.family


# ---- issue 28: public dates, licenses and the drafters of the public lists ------------------------------------

@pytest.mark.parametrize(("target", "released", "days"), [
    ("moonshotai/Kimi-K2.5", date(2026, 1, 27), 69),  # z-lab/Kimi-K2.5-DFlash 2026-04-06
    ("moonshotai/Kimi-K2.6", date(2026, 4, 20), 20),  # z-lab/Kimi-K2.6-DFlash 2026-05-10
])
def test_kimi_release_days_are_the_public_ones(catalog: Catalog, target: str, released: date, days: int) -> None:
    entry = catalog.target(target)
    assert (entry.released, entry.released_precision) == (released, "day") and "https://" in entry.source
    lag = target_lag(entry.released, [_first_z_lab_dflash(catalog, target)], today=date(2026, 10, 1))
    assert lag.days == days


def test_gemma_4_assistants_are_apache_2_0_with_a_release_day(catalog: Catalog) -> None:
    assistants = [d for d in catalog.drafters if d.method == "gemma4-assistant"]
    assert len(assistants) == 6
    assert all(d.license == "apache-2.0" and d.released is not None and "Apache 2.0" in d.source for d in assistants)
    for small in ("google/gemma-4-E2B-it", "google/gemma-4-E4B-it"):
        assert catalog.target(small).released == date(2026, 4, 2)


@pytest.mark.parametrize(("target", "drafter_id"), [
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "lmsys/SGLang-EAGLE3-Qwen3-Next-80B-A3B-Instruct-FP8-perfect-blend-regenerated"),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "RedHatAI/Llama-4-Maverick-17B-128E-Instruct-speculator.eagle3"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "lmsys/SGLang-EAGLE3-Llama-4-Scout-17B-16E-Instruct-SpecForge"),
    ("Qwen/Qwen3-235B-A22B", "nvidia/Qwen3-235B-A22B-Eagle3"),
    ("zai-org/GLM-5.2-FP8", "RedHatAI/GLM-5.2-speculator.dspark-preview"),
])
def test_targets_the_public_lists_name_have_their_drafters(catalog: Catalog, target: str, drafter_id: str) -> None:
    assert drafter_id in {d.repo_id for d in catalog.drafters_for(target)}
    assert "https://github.com/" in drafter(catalog, drafter_id).source  # the list, pinned to a commit
    glm = catalog.target("zai-org/GLM-5.1")  # the BF16 GLM-5.1 z-lab says its FP8 drafter also serves
    assert glm.released == date(2026, 4, 7)
    assert "z-lab/GLM-5.1-FP8-DFlash" in {d.repo_id for d in catalog.drafters_for("zai-org/GLM-5.1")}


def test_a_list_row_without_a_target_repo_pairs_nothing(catalog: Catalog) -> None:
    for repo_id in ("RedHatAI/NVIDIA-Nemotron-3-Super-120B-A12B-speculator.dflash", "RedHatAI/GLM-5.2-speculator.dspark"):
        found = drafter(catalog, repo_id)
        assert found.targets == () and "not stated by the list" in (found.notes or "")


@pytest.mark.parametrize(("target", "released"), [
    ("meta-llama/Llama-3.3-70B-Instruct", date(2024, 12, 6)),
    ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", date(2025, 4, 5)),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", date(2025, 7, 29)),
    ("Qwen/Qwen3-235B-A22B", date(2025, 4, 29)),
    ("moonshotai/Kimi-K2-Instruct", date(2025, 7, 11)),
])
def test_release_days_filled_from_public_pages(catalog: Catalog, target: str, released: date) -> None:
    entry = catalog.target(target)
    assert (entry.released, entry.released_precision) == (released, "day")
    assert "release: https://" in entry.source
