"""Compatibility verdicts for (drafter, target) pairs built from reference configs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.domain.compat import CompatResult, check_pair, explain
from registry.domain.configs import ConfigError, parse_config
from tests.registry.config_fixtures import GOOD_FIXTURES, JSON_VALUES, damaged, fixture_bytes, fixture_config

VERDICTS = {"exact", "declared", "structural", "incompatible", "unknown"}


def pair(
    drafter: str | dict | None,
    target: str | dict | None,
    target_repo_id: str | None,
    *,
    method: str | None = None,
    declared: tuple[str, ...] | None = None,
    **kwargs: Any,
) -> CompatResult:
    """check_pair on fixture names (or dicts); declared defaults to the target repo itself."""
    return check_pair(
        fixture_config(drafter) if isinstance(drafter, str) else drafter,
        fixture_config(target) if isinstance(target, str) else target,
        drafter_method=method,
        target_repo_id=target_repo_id,
        declared_targets=declared if declared is not None else ((target_repo_id,) if target_repo_id else ()),
        **kwargs,
    )


def failed(result: CompatResult) -> list[str]:
    return [c.name for c in result.checks if c.ok is False]


def unchecked(result: CompatResult) -> list[str]:
    return [c.name for c in result.checks if c.ok is None]


def set_path(config: dict, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        config = config[key]
    config[last] = value


# ---- catalog pairs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "drafter, target, target_repo_id",
    [
        ("z-lab__Qwen3-4B-DFlash-b16.json", "Qwen__Qwen3-4B.json", "Qwen/Qwen3-4B"),
        ("z-lab__Qwen3-8B-DFlash-b16.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B"),
        ("z-lab__gpt-oss-20b-DFlash.json", "openai__gpt-oss-20b.json", "openai/gpt-oss-20b"),
        ("z-lab__gemma-4-31B-it-DFlash.json", "google__gemma-4-31B-it.json", "google/gemma-4-31B-it"),
        ("google__gemma-4-31B-it-assistant.json", "google__gemma-4-31B-it.json", "google/gemma-4-31B-it"),
        ("RedHatAI__Qwen3-8B-speculator.eagle3.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B"),
        ("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json", "meta-llama__Llama-3.1-8B-Instruct.json",
         "meta-llama/Llama-3.1-8B-Instruct"),
        ("deepseek-ai__dspark_qwen3_4b_block7.json", "Qwen__Qwen3-4B.json", "Qwen/Qwen3-4B"),
        ("synthetic__Qwen3-8B-DFlash2.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B"),
    ],
)  # fmt: skip
def test_catalog_pairs_are_exact(drafter: str, target: str, target_repo_id: str) -> None:
    result = pair(drafter, target, target_repo_id)
    assert result.verdict == "exact", result.reasons
    assert result.reasons[0] == f"declared for {target_repo_id}"
    assert failed(result) == []
    assert [r for r in result.reasons[1:] if not r.startswith("unchecked: ")] == []


def test_gpt_oss_pair_is_exact_and_lists_what_is_unknown() -> None:
    result = pair("z-lab__gpt-oss-20b-DFlash.json", "openai__gpt-oss-20b.json", "openai/gpt-oss-20b")
    assert result.verdict == "exact"
    assert unchecked(result) == ["vocab_size", "num_target_layers", "tokenizer"]
    assert "unchecked: vocab_size (drafter config gives no usable vocab_size)" in result.reasons
    assert "unchecked: num_target_layers (drafter config gives no usable num_target_layers)" in result.reasons
    checks = {c.name: c for c in result.checks}
    assert checks["target_layer_ids"].ok and "24 layers" in checks["target_layer_ids"].detail
    assert checks["mask_token_id"].ok and "200000" in checks["mask_token_id"].detail


def test_known_tokenizers_that_match_leave_nothing_unchecked() -> None:
    digest = "d" * 64
    result = pair(
        "z-lab__Qwen3-4B-DFlash-b16.json", "Qwen__Qwen3-4B.json", "Qwen/Qwen3-4B",
        drafter_tokenizer_digest=digest, target_tokenizer_digest=digest,
    )  # fmt: skip
    assert result.verdict == "exact"
    assert result.reasons == ("declared for Qwen/Qwen3-4B",)
    assert all(c.ok for c in result.checks)


def test_wrong_size_drafter_is_incompatible_naming_both_hidden_sizes() -> None:
    result = pair("z-lab__Qwen3-4B-DFlash-b16.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B", declared=("Qwen/Qwen3-4B",))
    assert result.verdict == "incompatible"
    assert failed(result) == ["hidden_size"]
    assert result.reasons == ("hidden_size 4096 != 2560 (target vs drafter)",)


def test_other_family_drafter_fails_several_checks() -> None:
    result = pair("z-lab__Qwen3.5-27B-DFlash.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B", declared=())
    assert result.verdict == "incompatible"
    assert set(failed(result)) == {"hidden_size", "vocab_size", "num_target_layers", "target_layer_ids", "mask_token_id"}
    assert "hidden_size 4096 != 5120 (target vs drafter)" in result.reasons


def test_finetune_with_the_same_config_is_structural() -> None:
    result = pair(
        "z-lab__Qwen3-4B-DFlash-b16.json", "Qwen__Qwen3-4B.json", "someone/Qwen3-4B-finetune",
        declared=("Qwen/Qwen3-4B",),
    )  # fmt: skip
    assert result.verdict == "structural"
    assert result.reasons[0] == (
        "not declared for someone/Qwen3-4B-finetune; every structural check passes: it will run, acceptance unmeasured"
    )
    assert "unchecked: tokenizer (no tokenizer digest for the target and the drafter)" in result.reasons


def test_declared_target_matches_case_insensitively() -> None:
    result = pair(
        "z-lab__Qwen3-8B-DFlash-b16.json", "Qwen__Qwen3-8B.json", "qwen/qwen3-8b", declared=("Qwen/Qwen3-8B",)
    )
    assert result.verdict == "exact"


def test_speculators_verifier_counts_as_a_declaration() -> None:
    result = pair("RedHatAI__Qwen3-8B-speculator.eagle3.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B", declared=())
    assert result.verdict == "exact"
    assert {c.name: c.ok for c in result.checks}["verifier"] is True


def test_plain_causal_lm_as_draft_model_is_structural() -> None:
    result = pair("Qwen__Qwen3-4B.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B", method="draft-lm", declared=())
    assert result.verdict == "structural"
    checks = {c.name: c for c in result.checks}
    assert checks["vocab_size"].ok and checks["llama.cpp vocab rule"].ok
    assert checks["tokenizer"].ok is None


def test_eagle3_default_aux_ids_and_target_hidden_size() -> None:
    result = pair(
        "yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json", "meta-llama__Llama-3.1-8B-Instruct.json",
        "meta-llama/Llama-3.1-8B-Instruct",
    )  # fmt: skip
    aux = {c.name: c for c in result.checks}["aux_layer_ids"]
    assert aux.ok and aux.detail.startswith("aux_layer_ids [1, 15, 28] (EAGLE-3 default)")
    # With target_hidden_size set, the drafter's own width may differ from the target's.
    drafter = fixture_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    drafter.update(hidden_size=2048, target_hidden_size=4096)
    result = pair(drafter, "meta-llama__Llama-3.1-8B-Instruct.json", "meta-llama/Llama-3.1-8B-Instruct")
    assert result.verdict == "exact"


# ---- every rule fails alone -------------------------------------------------------------------

Mutation = Callable[[dict], None]


@dataclass(frozen=True)
class FailAlone:
    drafter: str
    target: str
    target_repo_id: str
    check: str
    expected: tuple[str, ...]  # substrings of the reason: both values
    mutate_drafter: Mutation = lambda config: None
    mutate_target: Mutation = lambda config: None
    method: str | None = None
    digests: tuple[str | None, str | None] = (None, None)  # (drafter, target)
    kwargs: dict = field(default_factory=dict)


DFLASH = ("z-lab__Qwen3-4B-DFlash-b16.json", "Qwen__Qwen3-4B.json", "Qwen/Qwen3-4B")
DSPARK = ("deepseek-ai__dspark_qwen3_4b_block7.json", "Qwen__Qwen3-4B.json", "Qwen/Qwen3-4B")
DFLASH2 = ("synthetic__Qwen3-8B-DFlash2.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B")
ASSISTANT = ("google__gemma-4-31B-it-assistant.json", "google__gemma-4-31B-it.json", "google/gemma-4-31B-it")
EAGLE3 = ("RedHatAI__Qwen3-8B-speculator.eagle3.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B")
EAGLE3_ORIGINAL = (
    "yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json", "meta-llama__Llama-3.1-8B-Instruct.json",
    "meta-llama/Llama-3.1-8B-Instruct",
)  # fmt: skip
DRAFT_LM = ("Qwen__Qwen3-4B.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B")
OTHER_DIGESTS = ("a" * 64, "b" * 64)

FAIL_ALONE = {
    # DFlash family
    "dflash hidden_size": FailAlone(
        *DFLASH, "hidden_size", ("hidden_size 2560 != 2048",), mutate_drafter=lambda c: set_path(c, "hidden_size", 2048)
    ),
    "dspark hidden_size": FailAlone(
        *DSPARK, "hidden_size", ("hidden_size 2560 != 4096",), mutate_drafter=lambda c: set_path(c, "hidden_size", 4096)
    ),
    "dflash2 hidden_size": FailAlone(
        *DFLASH2, "hidden_size", ("hidden_size 4096 != 2560",), mutate_drafter=lambda c: set_path(c, "hidden_size", 2560)
    ),
    "dflash vocab_size": FailAlone(
        *DFLASH, "vocab_size", ("vocab_size 151936 != 152064",),
        mutate_drafter=lambda c: set_path(c, "vocab_size", 152064),
    ),
    "dflash num_target_layers": FailAlone(
        *DFLASH, "num_target_layers", ("num_hidden_layers 36 != 40",),
        mutate_drafter=lambda c: set_path(c, "num_target_layers", 40),
    ),
    "dflash target_layer_ids": FailAlone(
        *DFLASH, "target_layer_ids", ("[1, 9, 17, 25, 36]", "36 layers", ": [36]"),
        mutate_drafter=lambda c: set_path(c, "dflash_config.target_layer_ids", [1, 9, 17, 25, 36]),
    ),
    "dspark target_layer_ids": FailAlone(
        *DSPARK, "target_layer_ids", ("[1, 9, 17, 25, 33]", "30 layers", ": [33]"),
        mutate_drafter=lambda c: set_path(c, "num_target_layers", 30),
        mutate_target=lambda c: set_path(c, "num_hidden_layers", 30),
    ),
    "dflash mask_token_id": FailAlone(
        *DFLASH, "mask_token_id", ("mask_token_id 151936", "vocab_size 151936"),
        mutate_drafter=lambda c: set_path(c, "dflash_config.mask_token_id", 151936),
    ),
    "dflash2 mask_token_id": FailAlone(
        *DFLASH2, "mask_token_id", ("mask_token_id 248070", "vocab_size 151936"),
        mutate_drafter=lambda c: set_path(c, "dflash_config.mask_token_id", 248070),
    ),
    "dflash tokenizer": FailAlone(*DFLASH, "tokenizer", ("aaaaaaaaaaaa", "bbbbbbbbbbbb"), digests=OTHER_DIGESTS),
    "dflash encoder-decoder model_type": FailAlone(
        *DFLASH, "target architecture", ("'t5'", "decoder-only"), mutate_target=lambda c: set_path(c, "model_type", "t5")
    ),
    "dflash is_encoder_decoder": FailAlone(
        *DFLASH, "target architecture", ("'qwen3'", "encoder-decoder"),
        mutate_target=lambda c: set_path(c, "is_encoder_decoder", True),
    ),
    # Gemma 4 assistant
    "assistant target model_type": FailAlone(
        *ASSISTANT, "target architecture", ("'gemma3' != 'gemma4'",),
        mutate_target=lambda c: set_path(c, "model_type", "gemma3"),
    ),
    "assistant backbone_hidden_size": FailAlone(
        *ASSISTANT, "hidden_size", ("hidden_size 5376 != 3840", "backbone_hidden_size"),
        mutate_drafter=lambda c: set_path(c, "backbone_hidden_size", 3840),
    ),
    "assistant vocab_size": FailAlone(
        *ASSISTANT, "vocab_size", ("vocab_size 262144 != 262208",),
        mutate_drafter=lambda c: set_path(c, "text_config.vocab_size", 262208),
    ),
    "assistant tokenizer": FailAlone(*ASSISTANT, "tokenizer", ("aaaaaaaaaaaa", "bbbbbbbbbbbb"), digests=OTHER_DIGESTS),
    # EAGLE-3
    "eagle3 verifier": FailAlone(
        *EAGLE3, "verifier", ("Qwen/Qwen3-8B", "Qwen/Qwen3-14B"),
        mutate_drafter=lambda c: set_path(c, "speculators_config.verifier.name_or_path", "Qwen/Qwen3-14B"),
    ),
    "eagle3 verifier architectures": FailAlone(
        *EAGLE3, "verifier architectures", ("LlamaForCausalLM", "Qwen3ForCausalLM"),
        mutate_target=lambda c: set_path(c, "architectures", ["LlamaForCausalLM"]),
    ),
    "eagle3 aux_layer_ids": FailAlone(
        *EAGLE3, "aux_layer_ids", ("[1, 17, 37]", "36 layers", ": [36]"),
        mutate_drafter=lambda c: set_path(c, "eagle_aux_hidden_state_layer_ids", [1, 17, 37]),
    ),
    "eagle3 default aux_layer_ids": FailAlone(
        *EAGLE3_ORIGINAL, "aux_layer_ids", ("(EAGLE-3 default)", "3 layers", ": [-1]"),
        mutate_target=lambda c: set_path(c, "num_hidden_layers", 3),
    ),
    "eagle3 hidden_size": FailAlone(
        *EAGLE3, "hidden_size", ("hidden_size 4096 != 5120",),
        mutate_drafter=lambda c: set_path(c, "transformer_layer_config.hidden_size", 5120),
    ),
    "eagle3 target_hidden_size": FailAlone(
        *EAGLE3, "hidden_size", ("hidden_size 4096 != 2560", "target_hidden_size"),
        mutate_drafter=lambda c: set_path(c, "target_hidden_size", 2560),
    ),
    "eagle3 vocab_size": FailAlone(
        *EAGLE3_ORIGINAL, "vocab_size", ("vocab_size 128256 != 151936",),
        mutate_drafter=lambda c: set_path(c, "vocab_size", 151936),
    ),
    "eagle3 draft_vocab_size": FailAlone(
        *EAGLE3, "draft_vocab_size", ("151936", "200000"),
        mutate_drafter=lambda c: set_path(c, "draft_vocab_size", 200000),
    ),
    "eagle3 tokenizer": FailAlone(*EAGLE3, "tokenizer", ("aaaaaaaaaaaa", "bbbbbbbbbbbb"), digests=OTHER_DIGESTS),
    "eagle3 target architecture": FailAlone(
        *EAGLE3_ORIGINAL, "target architecture", ("'bart'",), mutate_target=lambda c: set_path(c, "model_type", "bart")
    ),
    # draft-lm
    "draft-lm vocab_size": FailAlone(
        *DRAFT_LM, "vocab_size", ("vocab_size 151936 != 152000",),
        mutate_drafter=lambda c: set_path(c, "vocab_size", 152000), method="draft-lm",
    ),
    "draft-lm llama.cpp eos": FailAlone(
        *DRAFT_LM, "llama.cpp vocab rule", ("eos_token_id [151645] != [151643]",),
        mutate_drafter=lambda c: set_path(c, "eos_token_id", 151643), method="draft-lm",
    ),
    "draft-lm llama.cpp bos": FailAlone(
        *DRAFT_LM, "llama.cpp vocab rule", ("bos_token_id 151643 != 0",),
        mutate_drafter=lambda c: set_path(c, "bos_token_id", 0), method="draft-lm",
    ),
    "draft-lm tokenizer": FailAlone(
        *DRAFT_LM, "tokenizer", ("aaaaaaaaaaaa", "bbbbbbbbbbbb"), digests=OTHER_DIGESTS, method="draft-lm"
    ),
    "draft-lm target architecture": FailAlone(
        *DRAFT_LM, "target architecture", ("'whisper'",), mutate_target=lambda c: set_path(c, "model_type", "whisper"),
        method="draft-lm",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", FAIL_ALONE.values(), ids=FAIL_ALONE.keys())
def test_each_rule_fails_alone_naming_both_values(case: FailAlone) -> None:
    baseline = pair(
        case.drafter, case.target, case.target_repo_id, method=case.method,
        drafter_tokenizer_digest="c" * 64 if case.digests[0] else None,
        target_tokenizer_digest="c" * 64 if case.digests[1] else None,
    )  # fmt: skip
    # A declared draft model is exact only once the tokenizers are compared too (both of its decisive checks).
    undecided = case.method == "draft-lm" and not case.digests[0]
    assert baseline.verdict == ("declared" if undecided else "exact") and failed(baseline) == [], baseline.reasons
    drafter, target = fixture_config(case.drafter), fixture_config(case.target)
    case.mutate_drafter(drafter)
    case.mutate_target(target)
    result = pair(
        drafter, target, case.target_repo_id, method=case.method,
        drafter_tokenizer_digest=case.digests[0], target_tokenizer_digest=case.digests[1],
    )  # fmt: skip
    assert result.verdict == "incompatible"
    assert failed(result) == [case.check]
    (reason,) = result.reasons
    for expected in case.expected:
        assert expected in reason


def test_llama_cpp_rule_fails_beyond_128_tokens_of_vocab_difference() -> None:
    drafter = fixture_config("Qwen__Qwen3-4B.json")
    drafter["vocab_size"] = 151936 + 129
    result = pair(drafter, "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B", method="draft-lm")
    assert failed(result) == ["vocab_size", "llama.cpp vocab rule"]
    assert "vocab_size 151936 vs 152065 differ by 129 > 128" in result.reasons[1]
    drafter["vocab_size"] = 151936 + 128
    assert failed(pair(drafter, "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B", method="draft-lm")) == ["vocab_size"]


def test_defaulted_layer_ids_say_so_when_they_fail() -> None:
    drafter = fixture_config("z-lab__Qwen3-4B-DFlash-b16.json")
    del drafter["dflash_config"]["target_layer_ids"]
    drafter["num_target_layers"] = 64
    result = pair(drafter, "Qwen__Qwen3-4B.json", "Qwen/Qwen3-4B")
    assert failed(result) == ["num_target_layers", "target_layer_ids"]
    assert "target_layer_ids [1, 16, 31, 46, 61] (defaulted from num_target_layers)" in result.reasons[1]


# ---- unknown ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bad_truncated.json", "bad_non_utf8.json", "bad_array.json"])
def test_unparseable_target_config_gives_unknown_with_the_reason(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(fixture_bytes(name))
    result = pair("z-lab__Qwen3-4B-DFlash-b16.json", None, "Qwen/Qwen3-4B", target_problem=str(caught.value))
    assert result.verdict == "unknown"
    assert result.reasons == (f"target config unusable: {caught.value}",)


def test_missing_configs_give_unknown_unless_declared() -> None:
    undeclared = pair("z-lab__Qwen3-4B-DFlash-b16.json", None, "Qwen/Qwen3-4B", declared=())
    assert undeclared.verdict == "unknown" and undeclared.reasons == ("target config missing",)
    result = pair(None, None, "Qwen/Qwen3-4B", method="dflash", declared=())
    assert result.verdict == "unknown"
    assert result.reasons == ("target config missing", "drafter config missing")


def test_declared_pair_with_unread_configs_is_declared_and_says_what_is_unchecked() -> None:
    """The publisher's word is kept while configs are unread (catalog drafters without geometry), but it is not
    called exact: nothing was checked (MiniMaxAI/MiniMax-M2.5's Pair page read "exact" so)."""
    result = pair(None, None, "moonshotai/Kimi-K2.6", method="dflash")
    assert result.verdict == "declared"
    assert result.reasons == (
        "declared for moonshotai/Kimi-K2.6; configs not read, nothing checked",
        "unchecked: target config missing",
        "unchecked: drafter config missing",
    )
    # but a broken config is never waved through
    broken = pair(None, None, "moonshotai/Kimi-K2.6", method="dflash", target_problem="config is not valid JSON")
    assert broken.verdict == "unknown"


def test_negative_sizes_in_the_target_give_unknown_with_the_reason() -> None:
    result = pair("z-lab__Qwen3-4B-DFlash-b16.json", "bad_negative_sizes.json", "Qwen/Qwen3-4B")
    assert result.verdict == "unknown"
    assert "target config: hidden_size -2560 is absurd (must be at least 1)" in result.reasons
    assert "target config: vocab_size -1 is absurd (must be at least 1)" in result.reasons


def test_bool_vocab_size_gives_unknown() -> None:
    target = fixture_config("Qwen__Qwen3-4B.json")
    target["vocab_size"] = True
    result = pair("z-lab__Qwen3-4B-DFlash-b16.json", target, "Qwen/Qwen3-4B")
    assert result.verdict == "unknown"
    assert "target config: vocab_size true is a boolean, not an integer" in result.reasons


def test_absurd_drafter_value_gives_unknown() -> None:
    drafter = fixture_config("z-lab__Qwen3-4B-DFlash-b16.json")
    drafter["hidden_size"] = -1
    result = pair(drafter, "Qwen__Qwen3-4B.json", "Qwen/Qwen3-4B")
    assert result.verdict == "unknown"
    assert result.reasons[0] == "drafter config: hidden_size -1 is absurd (must be at least 1)"


def test_a_real_mismatch_outranks_a_malformed_value() -> None:
    target = fixture_config("Qwen__Qwen3-8B.json")
    target["vocab_size"] = -5
    result = pair("z-lab__Qwen3-4B-DFlash-b16.json", target, "Qwen/Qwen3-8B")
    assert result.verdict == "incompatible"
    assert result.reasons == (
        "hidden_size 4096 != 2560 (target vs drafter)",
        "target config: vocab_size -5 is absurd (must be at least 1)",
    )


def test_missing_text_config_fields_give_unknown_naming_them() -> None:
    target = fixture_config("google__gemma-4-31B-it.json")
    target["text_config"] = {"model_type": "gemma4_text"}
    result = pair("z-lab__gemma-4-31B-it-DFlash.json", target, "google/gemma-4-31B-it", declared=())
    assert result.verdict == "unknown"
    assert result.reasons[0] == "nothing decisive could be checked (hidden_size)"
    assert (
        "unchecked: hidden_size (target config gives no usable hidden_size (in text_config or at top level))"
        in result.reasons
    )
    assert set(unchecked(result)) >= {"hidden_size", "vocab_size", "num_target_layers", "mask_token_id"}


def test_empty_configs_give_unknown_with_every_check_unchecked() -> None:
    result = pair({}, {}, "Qwen/Qwen3-4B", method="dflash", declared=())
    assert result.verdict == "unknown"
    assert all(c.ok is None for c in result.checks) and result.checks
    declared = pair({}, {}, "Qwen/Qwen3-4B", method="dflash")
    assert declared.verdict == "declared"
    assert declared.reasons[0] == "declared for Qwen/Qwen3-4B; not checked: hidden_size"
    assert all(r.startswith("unchecked: ") for r in declared.reasons[1:]) and len(declared.reasons) > 3


def test_unknown_methods_give_unknown() -> None:
    result = pair("Qwen__Qwen3-4B.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B")
    assert result.verdict == "unknown" and "names no drafting method" in result.reasons[0]
    result = pair({"speculators_model_type": "peagle"}, "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B")
    assert result.reasons == ("no compatibility rules for method 'peagle'",)


def test_explain_is_one_line_with_the_verdict_first() -> None:
    result = pair("z-lab__Qwen3-4B-DFlash-b16.json", "Qwen__Qwen3-8B.json", "Qwen/Qwen3-8B")
    assert explain(result) == "incompatible: hidden_size 4096 != 2560 (target vs drafter)"
    line = explain(pair("z-lab__gpt-oss-20b-DFlash.json", "openai__gpt-oss-20b.json", "openai/gpt-oss-20b"))
    assert line.startswith("exact: declared for openai/gpt-oss-20b; unchecked: vocab_size") and "\n" not in line


# ---- never raises -----------------------------------------------------------------------------

METHODS = st.sampled_from([None, "dflash", "dflash2", "dspark", "gemma4-assistant", "eagle3", "draft-lm", "mtp"])
DIGESTS = st.none() | st.sampled_from(["a" * 64, "b" * 64])
JSON_OBJECTS = st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(GOOD_FIXTURES), st.sampled_from(GOOD_FIXTURES), METHODS, DIGESTS, DIGESTS)
def test_check_pair_never_raises_on_damaged_configs(
    data: st.DataObject, drafter: str, target: str, method: str | None, digest_a: str | None, digest_b: str | None
) -> None:
    result = check_pair(
        damaged(fixture_config(drafter), data),
        damaged(fixture_config(target), data),
        drafter_method=method,
        target_repo_id=data.draw(st.none() | st.sampled_from(["Qwen/Qwen3-8B", "x/y"])),
        declared_targets=("Qwen/Qwen3-8B",),
        drafter_tokenizer_digest=digest_a,
        target_tokenizer_digest=digest_b,
    )
    assert result.verdict in VERDICTS and result.reasons
    assert "\n" not in explain(result)


@settings(max_examples=200, deadline=None)
@given(JSON_OBJECTS, JSON_OBJECTS, METHODS)
def test_check_pair_never_raises_on_arbitrary_dicts(drafter: dict, target: dict, method: str | None) -> None:
    result = check_pair(drafter, target, drafter_method=method, target_repo_id="a/b", declared_targets=("a/b",))
    assert result.verdict in VERDICTS


# ---- layer ids in the speculators layouts ---------------------------------------------------------------------


def _fixture_head(folder: str) -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / "data" / folder / "config.json").read_text())


def test_speculators_ids_count_hidden_states_and_read_as_layer_ids() -> None:
    """speculators' `eagle_aux_hidden_state_layer_ids` / `aux_hidden_state_layer_ids` name hidden states (0 is the
    embeddings), SpecForge's `eagle_config` ids and z-lab's `target_layer_ids` name layers: facts hold layer ids."""
    from registry.domain.drafter_facts import drafter_facts

    speculators_eagle3 = drafter_facts(_fixture_head("eagle3/speculators-llama"))
    assert speculators_eagle3.method == "eagle3"
    assert speculators_eagle3.aux_layer_ids == (0, 1, 2) and speculators_eagle3.aux_ids_from_hidden_state_indices
    yuhuili = drafter_facts(_fixture_head("eagle3/yuhuili"))
    assert yuhuili.aux_layer_ids == (0, 2, 4) and not yuhuili.aux_ids_from_hidden_state_indices
    assert yuhuili.draft_vocab_size == 48 and yuhuili.vocab_size == 96
    speculators_dflash = drafter_facts(_fixture_head("dflash/speculators-dflash"))
    assert speculators_dflash.method == "dflash" and speculators_dflash.target_layer_ids == (0, 2)
    assert speculators_dflash.mask_token_id == 5 and speculators_dflash.block_size == 4
    dspark = drafter_facts(_fixture_head("dflash/speculators-dspark"))
    assert dspark.method == "dspark" and dspark.target_layer_ids == (0, 2)


@pytest.mark.parametrize(("layers", "verdict"), [(3, "structural"), (2, "incompatible")])
def test_speculators_eagle3_layer_range(layers: int, verdict: str) -> None:
    target = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
              "num_hidden_layers": layers, "vocab_size": 96}
    result = check_pair(_fixture_head("eagle3/speculators-llama"), target, drafter_method=None, target_repo_id=None,
                        declared_targets=())
    assert result.verdict == verdict, result.reasons
    if verdict == "incompatible":
        assert any("hidden-state indices [1, 2, 3] minus 1" in r and ": [2]" in r for r in result.reasons)
