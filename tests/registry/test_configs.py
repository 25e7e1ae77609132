"""Config parsing, model/drafter facts, method detection, tokenizer digests and fingerprints."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models

from registry.domain.configs import ConfigError, config_fingerprint, model_facts, parse_config
from registry.domain.drafter_facts import build_target_layer_ids, detect_method, drafter_facts
from registry.domain.tokenizers import tokenizer_digest
from tests.registry.config_fixtures import (
    CONFIGS,
    FIXTURE_SOURCES,
    GOOD_FIXTURES,
    damaged,
    fixture_bytes,
    fixture_config,
)


def test_every_fixture_file_is_documented() -> None:
    assert sorted(p.name for p in CONFIGS.glob("*.json")) == sorted(FIXTURE_SOURCES)


# ---- parse_config -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", GOOD_FIXTURES)
def test_good_fixtures_parse_to_objects(name: str) -> None:
    config = parse_config(fixture_bytes(name))
    assert isinstance(config, dict) and config["architectures"]


def test_truncated_json_names_line_and_column() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(fixture_bytes("bad_truncated.json"))
    reason = str(caught.value)
    assert "not valid JSON" in reason and "line" in reason and "column" in reason
    assert "\n" not in reason


def test_non_utf8_is_refused_naming_the_byte() -> None:
    with pytest.raises(ConfigError, match=r"not UTF-8: byte 0xe9 at offset \d+"):
        parse_config(fixture_bytes("bad_non_utf8.json"))


def test_array_is_refused() -> None:
    with pytest.raises(ConfigError, match="JSON array, not an object"):
        parse_config(fixture_bytes("bad_array.json"))


@pytest.mark.parametrize("raw, kind", [(b'"qwen3"', "string"), (b"4096", "number"), (b"null", "null"), (b"true", "boolean")])
def test_other_non_objects_are_refused(raw: bytes, kind: str) -> None:
    with pytest.raises(ConfigError, match=f"JSON {kind}, not an object"):
        parse_config(raw)


def test_oversize_config_is_refused_by_size_before_parsing() -> None:
    # Valid JSON: only the size check can refuse it.
    body = b'{"padding": "' + b"x" * 100_000_000 + b'"}'
    with pytest.raises(ConfigError, match=r"config is 100,000,015 bytes, over the 4,000,000-byte limit"):
        parse_config(body)


def test_max_bytes_is_adjustable() -> None:
    raw = fixture_bytes("Qwen__Qwen3-8B.json")
    with pytest.raises(ConfigError, match="over the 100-byte limit"):
        parse_config(raw, max_bytes=100)
    assert parse_config(raw, max_bytes=len(raw))["hidden_size"] == 4096


def test_non_bytes_are_refused() -> None:
    with pytest.raises(ConfigError, match="must be bytes, got str"):
        parse_config('{"a": 1}')  # type: ignore[arg-type]


def test_byte_order_mark_is_accepted() -> None:
    assert parse_config(b"\xef\xbb\xbf" + fixture_bytes("Qwen__Qwen3-4B.json"))["hidden_size"] == 2560


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"vocab_size": ' + b"9" * 5000 + b"}", "not usable JSON"),
        (b"", "not valid JSON"),
        (b'{"a": 1} trailing', "Extra data"),
    ],
)
def test_pathological_json_is_refused(raw: bytes, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_config(raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_parse_config_only_ever_raises_config_error_on_random_bytes(raw: bytes) -> None:
    try:
        assert isinstance(parse_config(raw), dict)
    except ConfigError as error:
        assert str(error) and "\n" not in str(error)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_parse_config_only_ever_raises_config_error_on_damaged_configs(data: st.DataObject) -> None:
    raw = bytearray(fixture_bytes("z-lab__Qwen3-4B-DFlash-b16.json"))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        parse_config(bytes(raw))
    except ConfigError:
        pass


# ---- model facts ------------------------------------------------------------------------------


def test_model_facts_of_a_flat_config() -> None:
    facts = model_facts(fixture_config("Qwen__Qwen3-8B.json"))
    assert facts.architectures == ("Qwen3ForCausalLM",)
    assert facts.model_type == "qwen3"
    assert (facts.vocab_size, facts.hidden_size, facts.num_hidden_layers) == (151936, 4096, 36)
    assert (facts.num_attention_heads, facts.num_key_value_heads, facts.head_dim) == (32, 8, 128)
    assert (facts.bos_token_id, facts.eos_token_ids, facts.pad_token_id) == (151643, (151645,), None)
    assert facts.tie_word_embeddings is False
    assert facts.quantization is None and facts.num_nextn_predict_layers is None
    assert not facts.nested and facts.problems == ()


def test_model_facts_of_gpt_oss_and_deepseek() -> None:
    gpt_oss = model_facts(fixture_config("openai__gpt-oss-20b.json"))
    assert gpt_oss.quantization == "mxfp4"
    assert (gpt_oss.bos_token_id, gpt_oss.eos_token_ids, gpt_oss.pad_token_id) == (None, (200002,), 199999)
    deepseek = model_facts(fixture_config("deepseek-ai__DeepSeek-V3.json"))
    assert deepseek.num_nextn_predict_layers == 1
    assert deepseek.quantization == "fp8"
    assert (deepseek.vocab_size, deepseek.hidden_size, deepseek.num_hidden_layers) == (129280, 7168, 61)
    llama = model_facts(fixture_config("meta-llama__Llama-3.1-8B-Instruct.json"))
    assert llama.eos_token_ids == (128001, 128008, 128009)


@pytest.mark.parametrize(
    "name, vocab, hidden, layers, model_type",
    [
        ("google__gemma-3-12b-it.json", 262208, 3840, 48, "gemma3"),
        ("google__gemma-4-31B-it.json", 262144, 5376, 60, "gemma4"),
    ],
)
def test_nested_gemma_configs_are_read_from_text_config(
    name: str, vocab: int, hidden: int, layers: int, model_type: str
) -> None:
    facts = model_facts(fixture_config(name))
    assert (facts.vocab_size, facts.hidden_size, facts.num_hidden_layers) == (vocab, hidden, layers)
    # The checkpoint's own type, not the text tower's gemma*_text.
    assert facts.model_type == model_type
    assert facts.eos_token_ids == (1, 106)  # only at top level: fills the gap
    assert facts.nested and facts.problems == ()


def test_text_config_wins_over_the_top_level() -> None:
    config = fixture_config("google__gemma-3-12b-it.json")
    config["hidden_size"] = 1
    config["text_config"]["eos_token_id"] = 1
    facts = model_facts(config)
    assert facts.hidden_size == 3840
    assert facts.eos_token_ids == (1,)


def test_negative_sizes_are_problems_not_values() -> None:
    facts = model_facts(fixture_config("bad_negative_sizes.json"))
    assert facts.hidden_size is None and facts.vocab_size is None
    assert "hidden_size -2560 is absurd (must be at least 1)" in facts.problems
    assert "vocab_size -1 is absurd (must be at least 1)" in facts.problems
    assert facts.num_hidden_layers == 36


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("vocab_size", True, "vocab_size true is a boolean, not an integer"),
        ("vocab_size", 10**8 + 1, "vocab_size 100000001 is absurd (over 100000000)"),
        ("hidden_size", 10**7 + 1, "hidden_size 10000001 is absurd (over 10000000)"),
        ("hidden_size", 0, "hidden_size 0 is absurd (must be at least 1)"),
        ("hidden_size", 4096.0, "hidden_size 4096.0 is not an integer"),
        ("num_hidden_layers", "36", 'num_hidden_layers "36" is not an integer'),
        ("bos_token_id", -1, "bos_token_id -1 is absurd (must be at least 0)"),
        ("tie_word_embeddings", "yes", 'tie_word_embeddings "yes" is not true or false'),
        ("architectures", "Qwen3ForCausalLM", 'architectures "Qwen3ForCausalLM" is not a list of strings'),
        ("quantization_config", [], "quantization_config is a JSON array, not an object"),
    ],
)
def test_absurd_values_are_recorded_and_dropped(field: str, value: object, problem: str) -> None:
    config = fixture_config("Qwen__Qwen3-8B.json")
    config[field] = value
    facts = model_facts(config)
    assert problem in facts.problems
    assert facts.problems == (problem,)


def test_text_config_that_is_not_an_object_is_a_problem() -> None:
    facts = model_facts({"model_type": "gemma3", "text_config": [1, 2], "hidden_size": 3840})
    assert facts.problems == ("text_config is a JSON array, not an object",)
    assert facts.hidden_size == 3840


def test_quantization_without_method_is_unknown() -> None:
    assert model_facts({"quantization_config": {"bits": 4}}).quantization == "unknown"


# ---- detect_method ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, method",
    [
        ("z-lab__Qwen3-4B-DFlash-b16.json", "dflash"),
        ("z-lab__Qwen3-8B-DFlash-b16.json", "dflash"),
        ("z-lab__gpt-oss-20b-DFlash.json", "dflash"),
        ("z-lab__Qwen3.5-27B-DFlash.json", "dflash"),
        ("z-lab__gemma-4-31B-it-DFlash.json", "dflash"),
        ("synthetic__Qwen3-8B-DFlash2.json", "dflash2"),
        ("deepseek-ai__dspark_qwen3_4b_block7.json", "dspark"),
        ("google__gemma-4-31B-it-assistant.json", "gemma4-assistant"),
        ("RedHatAI__Qwen3-8B-speculator.eagle3.json", "eagle3"),
        ("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json", "eagle3"),
        ("Qwen__Qwen3-4B.json", None),
        ("meta-llama__Llama-3.1-8B-Instruct.json", None),
        ("openai__gpt-oss-20b.json", None),
        ("google__gemma-3-12b-it.json", None),
        ("google__gemma-4-31B-it.json", None),
        ("deepseek-ai__DeepSeek-V3.json", None),
    ],
)
def test_detect_method_of_fixtures(name: str, method: str | None) -> None:
    assert detect_method(fixture_config(name)) == method


@pytest.mark.parametrize(
    "config, method",
    [
        ({"dflash_config": {"mask_token_id": 4}}, "dflash"),
        ({"dflash_config": {"projector_type": "dspark"}}, "dspark"),
        ({"architectures": ["Gemma4UnifiedAssistantForCausalLM"]}, "gemma4-assistant"),
        ({"model_type": "gemma4_assistant"}, "gemma4-assistant"),
        ({"architectures": ["DFlashSpeculator"], "speculators_model_type": "dflash"}, "dflash"),
        ({"speculators_model_type": "dspark"}, "dspark"),
        ({"speculators_model_type": "eagle3"}, "eagle3"),
        ({"speculators_model_type": "peagle"}, "peagle"),
        # nebius/EAGLE3-gpt-oss-20b: plain LlamaForCausalLM with a truncated vocab and one layer.
        ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "truncated_vocab_size": 32000}, "eagle3"),
        ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "draft_vocab_size": 32000}, None),
        ({"architectures": "DFlashDraftModel"}, None),
        ({}, None),
    ],
)
def test_detect_method_of_variants(config: dict, method: str | None) -> None:
    assert detect_method(config) == method


# ---- drafter facts ----------------------------------------------------------------------------


def test_drafter_facts_of_a_dflash_drafter() -> None:
    facts = drafter_facts(fixture_config("z-lab__Qwen3-4B-DFlash-b16.json"))
    assert facts.method == "dflash"
    assert facts.block_size == 16
    assert facts.target_layer_ids == (1, 9, 17, 25, 33) and not facts.target_layer_ids_defaulted
    assert (facts.num_target_layers, facts.mask_token_id) == (36, 151669)
    assert (facts.hidden_size, facts.vocab_size) == (2560, 151936)
    assert facts.layer_types == ("full_attention",) * 5
    assert facts.sliding_window is None and facts.final_logit_softcapping is None
    assert facts.model.num_hidden_layers == 5
    assert facts.problems == ()


def test_drafter_facts_of_gemma_and_gpt_oss_drafters() -> None:
    gemma = drafter_facts(fixture_config("z-lab__gemma-4-31B-it-DFlash.json"))
    assert (gemma.mask_token_id, gemma.sliding_window, gemma.final_logit_softcapping) == (4, 2048, 30.0)
    assert gemma.target_layer_ids == (1, 12, 23, 35, 46, 57)
    gpt_oss = drafter_facts(fixture_config("z-lab__gpt-oss-20b-DFlash.json"))
    assert (gpt_oss.block_size, gpt_oss.num_target_layers, gpt_oss.vocab_size) == (8, None, None)


def test_mask_and_layer_ids_at_top_level_are_read() -> None:
    config = fixture_config("z-lab__Qwen3-4B-DFlash-b16.json")
    section = config.pop("dflash_config")
    config.update(section)
    facts = drafter_facts(config, "dflash")
    assert (facts.mask_token_id, facts.target_layer_ids) == (151669, (1, 9, 17, 25, 33))


def test_dflash_config_wins_over_top_level_and_holds_dflash2_block_size() -> None:
    config = fixture_config("synthetic__Qwen3-8B-DFlash2.json")
    config["block_size"] = 8
    facts = drafter_facts(config)
    assert facts.method == "dflash2" and facts.block_size == 16


def test_missing_target_layer_ids_are_defaulted_and_marked() -> None:
    config = fixture_config("z-lab__Qwen3-4B-DFlash-b16.json")
    del config["dflash_config"]["target_layer_ids"]
    facts = drafter_facts(config)
    assert facts.target_layer_ids == (1, 9, 17, 25, 33)
    assert facts.target_layer_ids_defaulted


def test_layer_ids_cannot_be_defaulted_without_num_target_layers() -> None:
    config = fixture_config("z-lab__gpt-oss-20b-DFlash.json")
    del config["dflash_config"]["target_layer_ids"]
    facts = drafter_facts(config)
    assert facts.target_layer_ids is None and not facts.target_layer_ids_defaulted


@pytest.mark.parametrize(
    "num_target_layers, num_fused, expected",
    [
        (36, 5, (1, 9, 17, 25, 33)),
        (64, 5, (1, 16, 31, 46, 61)),
        (40, 5, (1, 10, 19, 28, 37)),
        (60, 6, (1, 12, 23, 35, 46, 57)),
        (61, 6, (1, 12, 24, 35, 47, 58)),
        (36, 1, (18,)),
    ],
)
def test_default_target_layer_ids_match_the_reference(
    num_target_layers: int, num_fused: int, expected: tuple[int, ...]
) -> None:
    assert build_target_layer_ids(num_target_layers, num_fused) == expected


def test_drafter_facts_of_a_speculators_eagle3_head() -> None:
    facts = drafter_facts(fixture_config("RedHatAI__Qwen3-8B-speculator.eagle3.json"))
    assert facts.method == "eagle3"
    # transformer_layer_config carries the geometry, including the target's vocab size.
    assert (facts.hidden_size, facts.vocab_size, facts.draft_vocab_size) == (4096, 151936, 32000)
    assert facts.target_hidden_size is None
    # speculators counts hidden states (0 = embeddings); the facts hold the layer ids whose output is read.
    assert facts.aux_layer_ids == (0, 16, 31) and facts.aux_ids_from_hidden_state_indices
    assert facts.verifier_name == "Qwen/Qwen3-8B"
    assert facts.verifier_architectures == ("Qwen3ForCausalLM",)
    assert facts.speculative_tokens == 5
    assert facts.problems == ()


def test_original_eagle3_aux_ids_come_from_eagle_config() -> None:
    config = fixture_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    assert drafter_facts(config).aux_layer_ids is None
    config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 15, 28]}
    assert drafter_facts(config).aux_layer_ids == (1, 15, 28)


def test_speculators_dflash_reads_aux_hidden_state_layer_ids() -> None:
    config = {
        "architectures": ["DFlashSpeculator"],
        "speculators_model_type": "dflash",
        "aux_hidden_state_layer_ids": [1, 9, 17, 25, 33],
        "block_size": 16,
        "mask_token_id": 151669,
        "transformer_layer_config": {"model_type": "qwen3", "hidden_size": 4096, "vocab_size": 151936},
        "speculators_config": {"verifier": {"name_or_path": "Qwen/Qwen3-8B"}},
    }
    facts = drafter_facts(config)
    assert facts.method == "dflash"
    # Hidden-state indices: speculators' converter writes z-lab's layer id + 1, so these are layer ids minus one.
    assert facts.target_layer_ids == (0, 8, 16, 24, 32)
    assert (facts.block_size, facts.mask_token_id, facts.hidden_size) == (16, 151669, 4096)
    assert facts.verifier_name == "Qwen/Qwen3-8B"


def test_gemma4_assistant_facts() -> None:
    facts = drafter_facts(fixture_config("google__gemma-4-31B-it-assistant.json"))
    assert facts.method == "gemma4-assistant"
    assert facts.backbone_hidden_size == 5376
    assert facts.vocab_size == 262144 and facts.model.num_hidden_layers == 4


@pytest.mark.parametrize(
    "mutate, problem",
    [
        (lambda c: c["dflash_config"].update(target_layer_ids="1,9"), 'target_layer_ids "1,9" is not a non-empty'),
        (lambda c: c["dflash_config"].update(target_layer_ids=[]), "target_layer_ids [] is not a non-empty"),
        (lambda c: c["dflash_config"].update(target_layer_ids=[1, -2]), "target_layer_ids -2 is absurd"),
        (lambda c: c["dflash_config"].update(mask_token_id=False), "mask_token_id false is a boolean"),
        (lambda c: c.update(dflash_config="x"), "dflash_config is a JSON string, not an object"),
        (lambda c: c.update(final_logit_softcapping=-30), "final_logit_softcapping -30 is not a positive number"),
        (lambda c: c.update(layer_types=[1]), "layer_types [1] is not a list of strings"),
    ],
)
def test_malformed_drafter_fields_are_problems(mutate, problem: str) -> None:
    config = fixture_config("z-lab__Qwen3-4B-DFlash-b16.json")
    mutate(config)
    facts = drafter_facts(config)
    assert any(p.startswith(problem) for p in facts.problems), facts.problems


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(GOOD_FIXTURES))
def test_fact_readers_never_raise_on_damaged_configs(data: st.DataObject, name: str) -> None:
    config = damaged(fixture_config(name), data)
    detect_method(config)
    model_facts(config)
    facts = drafter_facts(config)
    assert all(isinstance(p, str) and "\n" not in p for p in facts.problems)


# ---- tokenizer digest -------------------------------------------------------------------------


def tiny_tokenizer_json(vocab: dict[str, int] | None = None, merges: list[tuple[str, str]] | None = None) -> str:
    vocab = vocab or {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}
    merges = merges or [("a", "b"), ("ab", "c")]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.add_special_tokens(["<s>", "</s>"])
    return tokenizer.to_str()


TOKENIZER_CONFIG = json.dumps({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": True})


def test_tokenizer_digest_ignores_key_order_and_whitespace() -> None:
    compact = tiny_tokenizer_json()
    reordered = json.dumps(json.loads(compact), indent=4, sort_keys=True)
    digest = tokenizer_digest({"tokenizer.json": compact.encode()})
    assert digest is not None and len(digest) == 64
    assert tokenizer_digest({"tokenizer.json": reordered.encode()}) == digest


def test_tokenizer_digest_treats_merge_pairs_and_strings_alike() -> None:
    tokenizer = json.loads(tiny_tokenizer_json())
    as_pairs = copy.deepcopy(tokenizer)
    as_pairs["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in tokenizer["model"]["merges"]]
    as_strings = copy.deepcopy(tokenizer)
    as_strings["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in tokenizer["model"]["merges"]]
    assert tokenizer_digest({"tokenizer.json": json.dumps(as_pairs).encode()}) == tokenizer_digest(
        {"tokenizer.json": json.dumps(as_strings).encode()}
    )


def test_tokenizer_digest_changes_with_what_decides_token_ids() -> None:
    base = {"tokenizer.json": tiny_tokenizer_json().encode(), "tokenizer_config.json": TOKENIZER_CONFIG.encode()}
    digest = tokenizer_digest(base)
    other_vocab = {**base, "tokenizer.json": tiny_tokenizer_json(vocab={"a": 0, "b": 2, "c": 1, "ab": 3, "abc": 4}).encode()}
    other_merges = {**base, "tokenizer.json": tiny_tokenizer_json(merges=[("a", "b")]).encode()}
    other_eos = {**base, "tokenizer_config.json": TOKENIZER_CONFIG.replace("</s>", "<s>").encode()}
    no_bos = {**base, "tokenizer_config.json": TOKENIZER_CONFIG.replace("true", "false").encode()}
    digests = {tokenizer_digest(files) for files in (base, other_vocab, other_merges, other_eos, no_bos)}
    assert len(digests) == 5 and digest in digests


def test_special_tokens_map_fills_gaps_and_tokenizer_config_wins() -> None:
    tokenizer = tiny_tokenizer_json().encode()
    from_config = tokenizer_digest({"tokenizer.json": tokenizer, "tokenizer_config.json": TOKENIZER_CONFIG.encode()})
    split = tokenizer_digest(
        {
            "tokenizer.json": tokenizer,
            "tokenizer_config.json": b'{"bos_token": "<s>", "add_bos_token": true, "eos_token": null}',
            "special_tokens_map.json": b'{"eos_token": "</s>", "bos_token": "</s>"}',
        }
    )
    assert split == from_config


def test_tokenizer_model_bytes_are_digested() -> None:
    model = b"\x0a\x05\x0a\x01a\x15\x00\x00\x00\x00"
    digest = tokenizer_digest({"tokenizer.model": model})
    assert digest is not None and digest != tokenizer_digest({"tokenizer.model": model + b"\x00"})
    assert tokenizer_digest({"sub/tokenizer.model": model}) == digest


def test_no_tokenizer_file_gives_none() -> None:
    assert tokenizer_digest({}) is None
    assert tokenizer_digest({"tokenizer_config.json": TOKENIZER_CONFIG.encode()}) is None


@pytest.mark.parametrize(
    "files, reason",
    [
        ({"tokenizer.json": b'{"model": '}, "tokenizer.json is not valid JSON"),
        ({"tokenizer.json": b"[]"}, "tokenizer.json is a JSON array"),
        ({"tokenizer.json": b'{"added_tokens": []}'}, "tokenizer.json has no model object"),
        ({"tokenizer.json": b'{"model": {"type": "BPE"}}'}, "tokenizer.json model has no vocab"),
        ({"tokenizer.json": b'{"model": {"vocab": {}, "merges": [1]}}'}, "malformed merge: 1"),
        ({"tokenizer.json": b'{"model": {"vocab": {}}, "added_tokens": [1]}'}, "added_tokens is not a list of objects"),
        ({"tokenizer.model": b"<html>"}, "tokenizer.model is not a SentencePiece model"),
        ({"tokenizer.model": b""}, "tokenizer.model is not a SentencePiece model"),
        ({"tokenizer.model": b"\x0a", "tokenizer_config.json": b"\xff"}, "tokenizer_config.json is not UTF-8"),
    ],
)
def test_malformed_tokenizer_files_raise_config_error(files: dict[str, bytes], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason.replace("[", r"\[")):
        tokenizer_digest(files)


# ---- fingerprint ------------------------------------------------------------------------------


def test_config_fingerprint_ignores_layout_and_tracks_content() -> None:
    raw = fixture_bytes("z-lab__Qwen3-4B-DFlash-b16.json")
    config = parse_config(raw)
    relaid = parse_config(json.dumps(dict(reversed(list(config.items())))).encode())
    assert config_fingerprint(config) == config_fingerprint(relaid)
    assert len(config_fingerprint(config)) == 64
    changed = copy.deepcopy(config)
    changed["dflash_config"]["mask_token_id"] = 151670
    assert config_fingerprint(changed) != config_fingerprint(config)


@pytest.mark.parametrize(
    "name, width",
    [
        ("z-lab__Qwen3-8B-DFlash-b16.json", 4096),
        ("google__gemma-4-31B-it-assistant.json", 5376),
        ("RedHatAI__Qwen3-8B-speculator.eagle3.json", 4096),
    ],
)
def test_target_width_is_what_the_drafter_needs_from_its_target(name: str, width: int) -> None:
    assert drafter_facts(fixture_config(name)).target_width == width
    config = fixture_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    config.update(hidden_size=2048, target_hidden_size=4096)
    assert drafter_facts(config).target_width == 4096
