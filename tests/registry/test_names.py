"""Repo-id parsing on the names the reference material and the catalog actually use."""

from __future__ import annotations

import pytest

from registry.domain.catalog import load_catalog_data
from registry.domain.upgrades import is_own_pretrained_parent, is_post_trained, is_upgrade
from registry.domain.names import (
    RepoName,
    RepoNameError,
    derivative_kind,
    drafter_target_stem,
    name_key,
    parse_repo_id,
    split_repo_id,
)

# (repo id, family, generation, size, active size, variant, date, tags)
PARSE_CASES = [
    ("Qwen/Qwen3.5-35B-A3B", "qwen", "3.5", "35B", "A3B", None, None, ()),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen-coder", "3", "30B", "A3B", "instruct", None, ()),
    ("Qwen/Qwen3-Coder-Next", "qwen-coder-next", "3", None, None, None, None, ()),
    ("google/gemma-4-E2B-it", "gemma", "4", "E2B", None, "it", None, ()),
    ("google/gemma-3-12b-it", "gemma", "3", "12B", None, "it", None, ()),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama", "3.1", "8B", None, "instruct", None, ()),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama", "3.1", "8B", None, "instruct", None, ()),
    ("openai/gpt-oss-20b", "gpt-oss", None, "20B", None, None, None, ()),
    ("moonshotai/Kimi-K2.5", "kimi", "K2.5", None, None, None, None, ()),
    ("MiniMaxAI/MiniMax-M2.7", "minimax", "M2.7", None, None, None, None, ()),
    ("deepseek-ai/DeepSeek-V4-Flash", "deepseek", "V4", None, None, "flash", None, ()),
    ("deepseek-ai/DeepSeek-V4-Flash-0731", "deepseek", "V4", None, None, "flash", "0731", ()),
    ("zai-org/GLM-5.1", "glm", "5.1", None, None, None, None, ()),
    ("zai-org/GLM-5.1-FP8", "glm", "5.1", None, None, None, None, ("fp8",)),
    ("Qwen/Qwen3-4B-Instruct-2507", "qwen", "3", "4B", None, "instruct", "2507", ()),
    ("Qwen/Qwen3-8B-FP8", "qwen", "3", "8B", None, None, None, ("fp8",)),
    ("Qwen/Qwen3-8B-AWQ", "qwen", "3", "8B", None, None, None, ("awq",)),
    ("Qwen/Qwen3-8B-GGUF", "qwen", "3", "8B", None, None, None, ("gguf",)),
    ("unsloth/Qwen3-8B-bnb-4bit", "qwen", "3", "8B", None, None, None, ("bnb-4bit",)),
    ("Qwen/Qwen3-8B-Base", "qwen", "3", "8B", None, "base", None, ()),
    ("Qwen/Qwen3-VL-235B-A22B-Instruct", "qwen-vl", "3", "235B", "A22B", "instruct", None, ()),
    ("x/Mistral-Small-4-119B-2603", "mistral-small", "4", "119B", None, None, "2603", ()),
    ("x/Ling-flash-2.0", "ling-flash", "2.0", None, None, None, None, ()),
    (
        "google/gemma-4-12B-it-qat-q4_0-unquantized",
        "gemma",
        "4",
        "12B",
        None,
        "it",
        None,
        ("qat", "q4_0", "unquantized"),
    ),
    ("z-lab/Qwen3-8B-DFlash-b16", "qwen", "3", "8B", None, None, None, ("dflash", "b16")),
    ("deepseek-ai/dspark_qwen3_4b_block7", "qwen", "3", "4B", None, None, None, ("dspark", "block7")),
    ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "llama", "3.1", "8B", None, "instruct", None, ("eagle3",)),
]


@pytest.mark.parametrize(("repo_id", "family", "generation", "size", "active", "variant", "date", "tags"), PARSE_CASES)
def test_parse_examples(
    repo_id: str,
    family: str,
    generation: str | None,
    size: str | None,
    active: str | None,
    variant: str | None,
    date: str | None,
    tags: tuple[str, ...],
) -> None:
    parsed = parse_repo_id(repo_id)
    org, name = repo_id.split("/")
    assert parsed == RepoName(org, name, family, generation, size, active, variant, date, tags)
    assert parsed.repo_id == repo_id


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "Qwen3-8B",
        "bert-base-uncased",
        "a/b/c",
        "/Qwen3-8B",
        "Qwen/",
        "Qwen/Qwen3 8B",
        "Qwen/-x",
        "Qwen/x.",
        "Qwen/Qwen3-8B\n",
        "org/" + "x" * 97,
    ],
)
def test_refuses_what_is_not_a_repo_id(bad: str) -> None:
    with pytest.raises(RepoNameError):
        parse_repo_id(bad)
    with pytest.raises(RepoNameError):
        drafter_target_stem(bad)


def test_refusal_says_what_is_expected() -> None:
    with pytest.raises(RepoNameError, match="org/name"):
        split_repo_id("bert-base-uncased")


# Every model repo id in hub-protocol.md, with the family, generation and size it must parse to.
HUB_PROTOCOL_REPO_IDS = {
    "Qwen/Qwen3-8B": ("qwen", "3", "8B"),
    "Qwen/Qwen3-8B-Base": ("qwen", "3", "8B"),
    "Qwen/Qwen3-4B": ("qwen", "3", "4B"),
    "Qwen/Qwen3-4B-Instruct-2507": ("qwen", "3", "4B"),
    "Qwen/Qwen3-14B": ("qwen", "3", "14B"),
    "Qwen/Qwen3-32B": ("qwen", "3", "32B"),
    "meta-llama/Llama-3.1-8B-Instruct": ("llama", "3.1", "8B"),
    "meta-llama/Meta-Llama-3.1-8B-Instruct": ("llama", "3.1", "8B"),
    "google/gemma-3-12b-it": ("gemma", "3", "12B"),
    "google/gemma-3-1b-it": ("gemma", "3", "1B"),
    "deepseek-ai/DeepSeek-V3": ("deepseek", "V3", None),
    "openai/gpt-oss-20b": ("gpt-oss", None, "20B"),
    "z-lab/Qwen3-8B-DFlash-b16": ("qwen", "3", "8B"),
    "google-bert/bert-base-uncased": ("bert", None, None),
}


@pytest.mark.parametrize(("repo_id", "expected"), sorted(HUB_PROTOCOL_REPO_IDS.items()))
def test_every_hub_protocol_repo_id_parses(repo_id: str, expected: tuple[str, str | None, str | None]) -> None:
    parsed = parse_repo_id(repo_id)
    assert (parsed.family, parsed.generation, parsed.size) == expected


# Family, generation and size of every target in the catalog (drafters.md and hub-protocol.md §9).
CATALOG_TARGETS = {
    "Qwen/Qwen3-4B": ("qwen", "3", "4B"),
    "Qwen/Qwen3-8B": ("qwen", "3", "8B"),
    "Qwen/Qwen3-14B": ("qwen", "3", "14B"),
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": ("qwen-coder", "3", "30B"),
    "Qwen/Qwen3-Coder-Next": ("qwen-coder-next", "3", None),
    "Qwen/Qwen3.5-4B": ("qwen", "3.5", "4B"),
    "Qwen/Qwen3.5-9B": ("qwen", "3.5", "9B"),
    "Qwen/Qwen3.5-27B": ("qwen", "3.5", "27B"),
    "Qwen/Qwen3.5-35B-A3B": ("qwen", "3.5", "35B"),
    "Qwen/Qwen3.5-122B-A10B": ("qwen", "3.5", "122B"),
    "Qwen/Qwen3.5-397B-A17B": ("qwen", "3.5", "397B"),
    "Qwen/Qwen3.6-35B-A3B": ("qwen", "3.6", "35B"),
    "Qwen/Qwen3.6-27B": ("qwen", "3.6", "27B"),
    "Qwen/Qwen3.8-27B": ("qwen", "3.8", "27B"),
    "meta-llama/Llama-3.1-8B-Instruct": ("llama", "3.1", "8B"),
    "meta-llama/Llama-3.3-70B-Instruct": ("llama", "3.3", "70B"),
    "openai/gpt-oss-20b": ("gpt-oss", None, "20B"),
    "openai/gpt-oss-120b": ("gpt-oss", None, "120B"),
    "moonshotai/Kimi-K2.5": ("kimi", "K2.5", None),
    "moonshotai/Kimi-K2.6": ("kimi", "K2.6", None),
    "moonshotai/Kimi-K2-Instruct": ("kimi", "K2", None),
    "MiniMaxAI/MiniMax-M2.5": ("minimax", "M2.5", None),
    "MiniMaxAI/MiniMax-M2.7": ("minimax", "M2.7", None),
    "google/gemma-4-31B-it": ("gemma", "4", "31B"),
    "google/gemma-4-26B-A4B-it": ("gemma", "4", "26B"),
    "google/gemma-4-12B-it": ("gemma", "4", "12B"),
    "google/gemma-4-E2B-it": ("gemma", "4", "E2B"),
    "google/gemma-4-E4B-it": ("gemma", "4", "E4B"),
    "google/gemma-4-12B-it-qat-q4_0-unquantized": ("gemma", "4", "12B"),
    "google/gemma-3-12b-it": ("gemma", "3", "12B"),
    "deepseek-ai/DeepSeek-V3": ("deepseek", "V3", None),
    "deepseek-ai/DeepSeek-V4-Flash": ("deepseek", "V4", None),
    "deepseek-ai/DeepSeek-V4-Pro": ("deepseek", "V4", None),
    "zai-org/GLM-5.1-FP8": ("glm", "5.1", None),
    "lmsys/vicuna-13b-v1.3": ("vicuna", "1.3", "13B"),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": ("deepseek-llama", "R1", "8B"),
    "inclusionAI/Ling-flash-2.0": ("ling-flash", "2.0", None),
    "Qwen/Qwen3-32B": ("qwen", "3", "32B"),
    "mistralai/Mistral-Small-4-119B-2603": ("mistral-small", "4", "119B"),
    "meta-models/Muse-Glimmer-30B": ("muse-glimmer", None, "30B"),
    "moonshotai/Kimi-K3": ("kimi", "K3", None),
    "moonshotai/Kimi-K3.1-Pro": ("kimi", "K3.1", None),
    "moonshotai/Kimi-K2.7-Code": ("kimi", "K2.7", None),
    "zai-org/GLM-5.3-Flash": ("glm", "5.3", None),
    "z-lab/Alpamayo-1.5-10B": ("alpamayo", "1.5", "10B"),
    "z-lab/Alpamayo-R1-10B": ("alpamayo", "R1", "10B"),
    # Issue 28: the targets the public lists (speculators, SpecBundle, EAGLE-3) name.
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": ("llama-scout", "4", "17B"),
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": ("llama-maverick", "4", "17B"),
    "Qwen/Qwen3-30B-A3B-Instruct-2507": ("qwen", "3", "30B"),
    "Qwen/Qwen3-235B-A22B-Instruct-2507": ("qwen", "3", "235B"),
    "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": ("qwen-next", "3", "80B"),
    "Qwen/Qwen3-Coder-480B-A35B-Instruct": ("qwen-coder", "3", "480B"),
    "nex-agi/Qwen3-30B-A3B-Nex-N1": ("qwen", "3", "30B"),
    "nex-agi/Qwen3-32B-Nex-N1": ("qwen", "3", "32B"),
    "Qwen/Qwen3-1.7B": ("qwen", "3", "1.7B"),
    "Qwen/Qwen3-30B-A3B": ("qwen", "3", "30B"),
    "Qwen/Qwen3-235B-A22B": ("qwen", "3", "235B"),
    "allenai/OLMoE-1B-7B-0125-Instruct": ("olmoe", None, "1B"),
    "ibm-granite/granite-3.1-1b-a400m-instruct": ("granite", "3.1", "1B"),
    "zai-org/GLM-4.7-Flash": ("glm", "4.7", None),
    "zai-org/GLM-5.2-FP8": ("glm", "5.2", None),
    "zai-org/GLM-5.1": ("glm", "5.1", None),
}


def test_every_catalog_target_parses_as_expected() -> None:
    catalog = load_catalog_data()
    assert {target.repo_id for target in catalog.targets} == set(CATALOG_TARGETS)
    for target in catalog.targets:
        parsed = parse_repo_id(target.repo_id)
        assert (parsed.family, parsed.generation, parsed.size) == CATALOG_TARGETS[target.repo_id], target.repo_id


# Drafters whose name does not spell their catalog target exactly, and why.
STEM_DIFFERS_FROM_TARGET = {
    "z-lab/Qwen3-Coder-30B-A3B-DFlash": "z-lab drops '-Instruct' from the Qwen3-Coder target name",
    "RedHatAI/Qwen3-8B-Thinking-speculator.eagle3": "names the thinking mode of Qwen3-8B, not a repo",
    "deepseek-ai/dspark_gemma4_12b_block7": "DeepSpec names say 'gemma4_12b'; the catalog pairs them with -it",
    "deepseek-ai/dflash_gemma4_12b_block7": "as above",
    "deepseek-ai/eagle3_gemma4_12b_ttt7": "as above",
    "yuhuili/EAGLE3-Vicuna1.3-13B": "yuhuili writes 'Vicuna1.3-13B' for lmsys/vicuna-13b-v1.3",
    # The public lists (SpecBundle, EAGLE-3 README) pair these with the target; the names add or drop a word.
    "lmsys/sglang-EAGLE3-Llama-4-Maverick-17B-128E-Instruct-v1": "a '-v1' release suffix",
    "lmsys/sglang-EAGLE3-Llama-4-Scout-17B-16E-Instruct-v1": "a '-v1' release suffix",
    "lmsys/SGLang-EAGLE3-Qwen3-Next-80B-A3B-Instruct-FP8-perfect-blend-regenerated": "names its training data",
    "nvidia/Llama-4-Maverick-17B-128E-Eagle3": "drops '-Instruct'",
    "Zjcxy-SmartAI/Eagle3-Qwen3-8B-zh": "a '-zh' (Chinese data) suffix",
    "Zjcxy-SmartAI/Eagle3-Qwen3-32B-zh": "a '-zh' (Chinese data) suffix",
    "wantsleep/granite-3.1-1b-a400m-EAGLE3": "drops '-instruct'",
    "nvidia/Kimi-K2.5-Thinking-Eagle3": "names the thinking mode of Kimi-K2.5, not a repo",
}


# Real drafter names that the stem rule does not read, or reads as another model (suffixes `_eagle3`, `.dspark-preview`,
# `-Eagle3-v2`, a prefix before the target name):
# the catalog pairs them from the list that names their target, and the rule leaves them unpaired rather than guess.
STEM_NOT_READ = {
    "RedHatAI/GLM-5.2-speculator.dspark-preview", "AngelSlim/Qwen3-1.7B_eagle3", "AngelSlim/Qwen3-4B_eagle3",
    "Tengyunw/qwen3_8b_eagle3", "AngelSlim/Qwen3-8B_eagle3", "AngelSlim/Qwen3-14B_eagle3",
    "Tengyunw/qwen3_30b_moe_eagle3", "AngelSlim/Qwen3-a3B_eagle3", "AngelSlim/Qwen3-32B_eagle3",
    "wantsleep/OLMoE_1B_7B_Eagle3", "lightseekorg/kimi-k2.5-eagle3-mla", "nvidia/gpt-oss-120b-Eagle3-throughput",
    "nvidia/gpt-oss-120b-Eagle3-long-context", "nvidia/gpt-oss-120b-Eagle3-short-context", "nvidia/gpt-oss-120b-Eagle3-v2",
    "nvidia/gpt-oss-120b-Eagle3-v3",
    "Dogacel/specdrift-gpt-oss-120b-eagle3",  # read as a 'specdrift' family: a paper's prefix before the target name
}


def test_every_catalog_drafter_names_its_target() -> None:
    catalog = load_catalog_data()
    for drafter in catalog.drafters:
        parse_repo_id(drafter.repo_id)  # never raises on a real drafter id
        if drafter.built_in:
            continue  # a full checkpoint carrying its drafter (DeepSeek-V4 DSpark, MTP heads): named as a checkpoint
        stem = drafter_target_stem(drafter.repo_id)
        if drafter.repo_id in STEM_NOT_READ:
            # Once the rule reads it as its target, it must leave this set and match like the others.
            assert stem is None or parse_repo_id(f"x/{stem}").family != parse_repo_id(drafter.targets[0]).family, drafter.repo_id
            continue
        assert stem is not None, drafter.repo_id
        if not drafter.targets:
            continue
        target = drafter.targets[0]  # the one its name spells; a second is one its card says it also serves
        stem_parsed, target_parsed = parse_repo_id(f"x/{stem}"), parse_repo_id(target)
        assert (stem_parsed.family, stem_parsed.generation, stem_parsed.size) == (
            target_parsed.family,
            target_parsed.generation,
            target_parsed.size,
        ), drafter.repo_id
        if drafter.repo_id in STEM_DIFFERS_FROM_TARGET:
            assert name_key(stem) != name_key(target)
        else:
            assert name_key(stem) == name_key(target), drafter.repo_id


@pytest.mark.parametrize(
    ("drafter", "stem"),
    [
        ("z-lab/Qwen3-8B-DFlash-b16", "Qwen3-8B"),
        ("z-lab/gemma4-12B-it-DFlash", "gemma-4-12B-it"),
        ("z-lab/LLaMA3.1-8B-Instruct-DFlash-UltraChat", "Llama-3.1-8B-Instruct"),
        ("google/gemma-4-E2B-it-assistant", "gemma-4-E2B-it"),
        ("RedHatAI/Qwen3-8B-speculator.eagle3", "Qwen3-8B"),
        ("RedHatAI/Mistral-Small-4-119B-2603.dflash", "Mistral-Small-4-119B-2603"),
        ("deepseek-ai/dspark_qwen3_4b_block7", "Qwen3-4B"),
        ("deepseek-ai/eagle3_gemma4_12b_ttt7", "gemma-4-12B"),
        ("deepseek-ai/DeepSeek-V4-Flash-DSpark", "DeepSeek-V4-Flash"),
        ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "Llama-3.1-8B-Instruct"),
        ("yuhuili/EAGLE3-DeepSeek-R1-Distill-LLaMA-8B", "DeepSeek-R1-Distill-Llama-8B"),
        ("lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct-SpecForge", "Llama-3.1-8B-Instruct"),
        ("zhuyksir/EAGLE3-gpt-oss-20b-bf16", "gpt-oss-20b"),
        ("AQ-MedAI/Kimi-K2-Instruct-eagle3", "Kimi-K2-Instruct"),
        ("z-lab/GLM-5.1-FP8-DFlash", "GLM-5.1-FP8"),
        ("z-lab/Qwen3.8-27B-DFlash2-GGUF", "Qwen3.8-27B"),
        ("Qwen/Qwen3-8B", None),
        ("google/gemma-4-E2B-it", None),
    ],
)
def test_drafter_target_stem(drafter: str, stem: str | None) -> None:
    assert drafter_target_stem(drafter) == stem


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("gemma4-12B-it", "gemma-4-12B-it"),
        ("LLaMA3.1-8B-Instruct", "Llama-3.1-8B-Instruct"),
        ("gemma-3-12B-it", "gemma-3-12b-it"),
        ("qwen3_4b", "Qwen3-4B"),
        ("Qwen3-8B", "Qwen/Qwen3-8B"),
    ],
)
def test_name_key_equates_spellings(left: str, right: str) -> None:
    assert name_key(left) == name_key(right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("Qwen3-8B", "Qwen3-14B"),
        ("Qwen3.5-27B", "Qwen3.6-27B"),
        ("gemma-4-12B-it", "gemma-4-12B"),
        ("GLM-5.1", "GLM-5.1-FP8"),
    ],
)
def test_name_key_keeps_different_models_apart(left: str, right: str) -> None:
    assert name_key(left) != name_key(right)


def upgrades(old: str, new: str, post_trained: bool = False) -> bool:
    return is_upgrade(parse_repo_id(old), parse_repo_id(new), post_trained=post_trained)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-27B"),
        ("Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.6-35B-A3B"),
        ("google/gemma-3-12b-it", "google/gemma-4-12B-it"),
        ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.6"),
        ("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2.7"),
        ("zai-org/GLM-5.1", "zai-org/GLM-5.2"),
        ("Qwen/Qwen3.6-27B", "Qwen/Qwen3.8-27B"),
        ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Flash-0731"),
        ("Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B-Instruct-2510"),
        ("Qwen/Qwen3.5-27B", "Qwen/Qwen3.6-35B-A3B"),  # a newer generation at another size
        ("Qwen/Qwen3-8B", "Qwen/Qwen3.5-27B"),
        ("openai/gpt-oss-20b", "openai/gpt-oss-20b-v2"),  # its first numbered release after an unversioned one
    ],
)
def test_is_upgrade(old: str, new: str) -> None:
    assert upgrades(old, new)
    assert not upgrades(new, old)


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "Qwen/Qwen3.5-30B-A3B-Instruct", "different line"),
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-Coder-8B", "different line"),
        ("google/gemma-3-12b-it", "google/gemma-4-12B", "the bare name may be the pretrained sibling"),
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B", "same release"),
        ("Qwen/Qwen3-8B", "qwen/qwen3-8b", "same release, typed in another case"),
        ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8", "a quantized copy is not a newer release"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3", "R and V are different lines"),
        ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4-Pro", "another tier of one generation"),
        ("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4.1-Pro", "a tier swapped, not added"),
        ("Qwen/Qwen3-8B", "someone/Qwen3.5-8B", "another org's upload"),
        ("Qwen/Qwen3-4B-Thinking-2507", "Qwen/Qwen3-4B-Instruct-2510", "the other half of a split hybrid"),
    ],
)
def test_is_not_upgrade(old: str, new: str, why: str) -> None:
    assert not upgrades(old, new), why


def test_generation_two_point_zero_equals_two() -> None:
    assert not upgrades("x/Foo-2-7B", "x/Foo-2.0-7B")
    assert upgrades("x/Foo-2.0-7B", "x/Foo-2.1-7B")
    assert upgrades("x/Foo-3.9-7B", "x/Foo-3.10-7B")


# Issue 28 item 3: each of these was missed, or announced wrongly, by one of the two old rules (the alert's
# is_newer_generation, the table's is_successor). `post_trained`: the new release's card names a pretrained model of
# its own vendor as its base_model (finetune), see is_post_trained.
ISSUE_CASES = [
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B", True, True),  # card base_model: Qwen/Qwen3-8B-Base
    ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5", True, True),  # continual pretraining atop Kimi-K2-Base
    ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistralai/Mistral-Small-4-119B-2603", False, True),  # dated
    ("Qwen/Qwen3-4B", "Qwen/Qwen3-4B-Instruct-2507", False, True),
    ("deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.2-Exp", False, True),  # `Exp` is a stage, not a line
    ("deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Speciale", True, True),
    ("openai/gpt-oss-20b", "openai/gpt-oss-2-20b", False, True),  # a first release with no version
    ("moonshotai/Kimi-K2.6", "moonshotai/Kimi-K2.7-Code", False, False),  # a code variant: another use
    ("moonshotai/Kimi-K3", "moonshotai/Kimi-K3.1-Pro", False, True),
]


@pytest.mark.parametrize(("old", "new", "post_trained", "expected"), ISSUE_CASES)
def test_the_issues_upgrade_cases(old: str, new: str, post_trained: bool, expected: bool) -> None:
    assert upgrades(old, new, post_trained) is expected


def test_a_bare_release_upgrades_an_instruct_one_only_when_its_card_or_date_says_it_is_post_trained() -> None:
    assert not upgrades("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5")  # a bare name alone: maybe pretrained
    assert upgrades("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5", post_trained=True)
    assert is_post_trained("moonshotai/Kimi-K2.5", (("moonshotai/Kimi-K2-Base", "finetune"),))
    assert is_post_trained("deepseek-ai/DeepSeek-V3.2-Speciale", (("deepseek-ai/DeepSeek-V3.2-Exp-Base", "finetune"),))
    assert not is_post_trained("moonshotai/Kimi-K2.5", (("moonshotai/Kimi-K2-Base", "quantized"),))
    assert not is_post_trained("moonshotai/Kimi-K2.5", (("moonshotai/Kimi-K3-Base", "finetune"),))  # a newer parent
    assert not is_post_trained("acme/Kimi-K2.5", (("moonshotai/Kimi-K2-Base", "finetune"),))  # someone else's


# Real naming shapes, each pair of repos public on the Hub (the URL of each repo is its source). Columns: old, new,
# post_trained (the new card's base_model is its vendor's pretrained model: named in the comment), upgrade?
HF = "https://huggingface.co/"
REAL_SHAPES = [
    # Qwen: bare post-trained releases (card base_model: the -Base sibling), dated updates, lines of their own
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B", True, True),  # Qwen3-8B card: base_model Qwen/Qwen3-8B-Base
    ("Qwen/Qwen3-4B", "Qwen/Qwen3-4B-Instruct-2507", False, True),
    ("Qwen/Qwen3-4B", "Qwen/Qwen3-4B-Thinking-2507", False, True),
    ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-Instruct-2507", False, True),
    ("Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B-Thinking-2507", False, False),  # the other mode
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8", False, False),
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-Base", False, False),  # the pretrained sibling
    ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-Coder-30B-A3B-Instruct", False, False),  # another line
    # Llama: pretrained bare, post-trained -Instruct
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", False, True),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", False, True),
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-3B", False, False),  # pretrained, undated, no card base
    # Gemma: -pt and -it
    ("google/gemma-2-9b-it", "google/gemma-3-12b-it", False, True),
    ("google/gemma-3-12b-it", "google/gemma-3-12b-pt", False, False),
    # DeepSeek: letters are lines, dates and stages order one generation
    ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-0324", False, True),
    ("deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3.1", False, True),
    ("deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3.2-Exp", False, True),
    ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.2", True, True),  # base_model DeepSeek-V3.2-Exp-Base
    ("deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Speciale", True, True),  # base V3.2-Exp-Base
    ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528", False, True),
    ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3.1", False, False),
    # Kimi
    ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct-0905", False, True),
    ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Base", False, False),
    # GLM
    ("zai-org/GLM-4.5", "zai-org/GLM-4.6", False, True),
    ("zai-org/GLM-4.5", "zai-org/GLM-4.5-Air", False, False),  # a sibling of one generation, not a release after
    # Mistral: dated post-trained releases, -Base-dated pretrained ones
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistralai/Mistral-Small-3.2-24B-Instruct-2506", False, True),
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistralai/Mistral-Small-3.1-24B-Base-2503", False, False),
    # gpt-oss
    ("openai/gpt-oss-20b", "openai/gpt-oss-120b", False, False),  # another size, no newer generation
    # MiniMax
    ("MiniMaxAI/MiniMax-M2", "MiniMaxAI/MiniMax-M2.1", False, True),
    ("MiniMaxAI/MiniMax-M2.1", "MiniMaxAI/MiniMax-M2.5", False, True),
    ("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2", False, False),
]


@pytest.mark.parametrize(("old", "new", "post_trained", "expected"), REAL_SHAPES,
                         ids=[f"{o}->{n}" for o, n, _, _ in REAL_SHAPES])
def test_real_naming_shapes(old: str, new: str, post_trained: bool, expected: bool) -> None:
    sources = (HF + old, HF + new)  # where each name is public
    assert all(source.count("/") == 4 for source in sources)
    assert upgrades(old, new, post_trained) is expected, sources


def test_the_real_shapes_cover_every_vendor_the_issue_names() -> None:
    orgs = {old.split("/")[0] for old, _, _, _ in REAL_SHAPES}
    assert len(REAL_SHAPES) >= 20
    assert orgs >= {"Qwen", "meta-llama", "google", "deepseek-ai", "moonshotai", "zai-org", "mistralai", "openai",
                    "MiniMaxAI"}


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Qwen/Qwen3-8B-FP8", "quantized"),
        ("Qwen/Qwen3-8B-AWQ", "quantized"),
        ("Qwen/Qwen3-8B-GGUF", "quantized"),
        ("unsloth/Qwen3-8B-bnb-4bit", "quantized"),
        ("RedHatAI/Qwen3-8B-quantized.w4a16", "quantized"),
        ("Qwen/Qwen3.5-27B", None),
        ("x/Qwen3-8B-w4a16", "quantized"),
        ("x/Qwen3-8B-GPTQ-Int4", "quantized"),
        ("x/Llama-3.1-8B-Instruct-Q4_K_M", "quantized"),
        ("Qwen3-8B-FP8", "quantized"),
        ("Qwen/Qwen3-8B-Base", None),
        ("Qwen/Qwen3-8B", None),
        ("Qwen/Qwen3-4B-Instruct-2507", None),
        ("x/Qwen3-8B-abliterated", "finetune"),
        ("x/Llama-3.1-8B-Instruct-SFT", "finetune"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "finetune"),
    ],
)
def test_derivative_kind(name: str, kind: str | None) -> None:
    assert derivative_kind(name) == kind


@pytest.mark.parametrize(("old", "new", "pairs"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.4-8B", False),  # the pretrained sibling
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.4-8B-Instruct", True),
    ("google/gemma-3-12b-it", "google/gemma-4-12b-pt", False),
    ("google/gemma-3-12b-it", "google/gemma-4-E2B-it", True),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B-Base", False),
    ("Qwen/Qwen3-8B", "Qwen/Qwen3.5-27B", True),
    ("Qwen/Qwen3.5-27B", "Qwen/Qwen3-8B", False),
    ("Qwen/Qwen3-8B", "Qwen/Qwen3.5-Coder-8B", False),
])
def test_newer_generations_pair_like_with_like(old: str, new: str, pairs: bool) -> None:
    assert upgrades(old, new) is pairs


@pytest.mark.parametrize(("release", "parent", "own"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", True),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B", True),
    ("google/gemma-3-12b-it", "google/gemma-3-12b-pt", True),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B", True),
    ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B-Base", True),
    ("acme-labs/Qwen3-8B-Support-FT", "Qwen/Qwen3-8B", False),  # someone else's finetune
    ("meta-llama/Llama-Guard-3-8B", "meta-llama/Llama-3.1-8B", False),  # another line
    ("Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct", False),  # instruct is no pretrained parent
    ("Qwen/Qwen3-8B", "/home/user/models/Qwen3-8B-Base", False),  # a local path is no repo
    ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2-Base", True),  # continual pretraining atop an older base
    ("deepseek-ai/DeepSeek-V3.2-Speciale", "deepseek-ai/DeepSeek-V3.2-Exp-Base", True),
    ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K3-Base", False),  # a newer generation is no parent
])
def test_a_vendors_own_pretrained_parent(release: str, parent: str, own: bool) -> None:
    assert is_own_pretrained_parent(release, parent) is own
