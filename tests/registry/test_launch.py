"""`drafters launch`: every exact pair of the catalog and every drafter built into a checkpoint gets a command per
engine, or the reason there is none; each command is checked against the values the engines define in their own
sources (tests/data/engine_sources.json, written by tests/data/regenerate_engine_sources.py from the released
packages): methods, algorithms, flags, keys, what is required, and the draft-length rule."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from registry.calibration.launch_inputs import built_in_pairs, exact_pairs, measured_draft_length, pick_gpu, \
    side_parameters
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.domain.launch import ENGINES, DraftLength, Launch, PairFacts, launch_command
from registry.domain.llama_commands import BUILT_IN_EXPORT_ARCHITECTURES, CONVERTER_COMMAND, EAGLE3_CONVERTER_KEY, \
    eagle3_converter_layers
from registry.domain.records import RevisionSpec
from registry.domain.run import Run
from registry.store import Store
from tests.registry.run_fixtures import full_run, measured
from tests.support.cli import drafters as run_drafters

SOURCES = json.loads((Path(__file__).resolve().parents[1] / "data" / "engine_sources.json").read_text())
VLLM = SOURCES["vllm"]
SGLANG = SOURCES["sglang"]
LLAMA = SOURCES["llamacpp"]
SHA = "9b41424b7109f9c5413454f481b09a82b85333f4"


def _flags(argv: tuple[str, ...]) -> list[str]:
    return [a for a in argv if a.startswith("--")]


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def check_vllm(pair: PairFacts, result: Launch) -> dict:
    """The command against vLLM's own definitions (values, required keys, the draft-length rule)."""
    argv = result.argv
    assert argv[:3] == ("vllm", "serve", pair.target)
    unknown = set(_flags(argv)) - set(VLLM["engine_args"]["flags"])
    assert not unknown, f"flags vLLM's arg_utils.py does not define: {unknown}"
    spec = VLLM["speculative_config"]
    config = json.loads(_value(argv, "--speculative-config"))
    assert not set(config) - set(spec["keys"]), f"keys SpeculativeConfig does not define: {set(config) - set(spec['keys'])}"
    assert config["method"] in spec["methods"]
    if pair.target_sha:
        assert _value(argv, "--revision") == pair.target_sha
    if pair.built_in:
        # No `model`: vLLM takes the target's own drafter only for these methods, and only with a length given.
        assert "model" not in config and config["method"] in spec["built_in_without_model"]
        assert isinstance(config.get("num_speculative_tokens"), int)
        return config
    assert config["model"] == pair.drafter and config.get("revision") == pair.drafter_sha
    if pair.method == "dflash":
        # DFlash configs carry no n_predict: vLLM requires the length; a block is the anchor + the drafted tokens.
        assert spec["num_speculative_tokens_required_without_n_predict"]
        assert VLLM["dflash_proposer"]["query_tokens_per_request"] == "1 + num_speculative_tokens"
        assert 1 + config["num_speculative_tokens"] == pair.block_size
    if pair.method == "dspark":
        assert spec["dspark_default_is_block_size"]
        assert config.get("num_speculative_tokens") == pair.block_size  # the block, or vLLM reads it itself
    if pair.method == "gemma4-assistant":
        assert config["method"] == "mtp" and config["num_speculative_tokens"] == spec["gemma4_assistant_n_predict"]
    return config


def check_sglang(pair: PairFacts, result: Launch) -> None:
    argv = result.argv
    hook = SGLANG["speculative_hook"]
    assert argv[:5] == ("python", "-m", "sglang.launch_server", "--model-path", pair.target)
    defined = set(SGLANG["spec_fields"]["flags"]) | set(SGLANG["model_fields"]["flags"])
    assert not set(_flags(argv)) - defined, f"flags SGLang does not define: {set(_flags(argv)) - defined}"
    algorithm = _value(argv, "--speculative-algorithm")
    assert algorithm in SGLANG["spec_fields"]["algorithms"]
    if pair.target_sha:
        assert _value(argv, "--revision") == pair.target_sha
    if pair.built_in and pair.method == "dspark":
        assert hook["dspark_bundled_draft_defaults_to_target"] and "--speculative-draft-model-path" not in argv
    elif pair.built_in:
        assert _value(argv, "--speculative-draft-model-path") == pair.target
    else:
        assert _value(argv, "--speculative-draft-model-path") == pair.drafter
        if pair.drafter_sha:
            assert _value(argv, "--speculative-draft-model-revision") == pair.drafter_sha
    if pair.method == "gemma4-assistant":
        assert algorithm in hook["gemma4_assistant_promotion"]["from"]
        assert hook["gemma4_assistant_promotion"]["to"] == "FROZEN_KV_MTP"
    if pair.method == "dflash":
        if pair.block_size is None:
            assert hook["dflash_block_from_draft_config"] and "--speculative-num-draft-tokens" not in argv
        else:
            # A DFLASH block that differs from num-draft-tokens runs silently wrong.
            assert int(_value(argv, "--speculative-num-draft-tokens")) == pair.block_size
    if pair.method == "dspark" and pair.block_size is None:
        assert hook["dspark_gamma_from_draft_config"] and "--speculative-dspark-block-size" not in argv
    if "--speculative-num-steps" in argv:
        assert hook["topk1_draft_tokens_are_steps_plus_one"] and _value(argv, "--speculative-eagle-topk") == "1"
        assert int(_value(argv, "--speculative-num-draft-tokens")) == int(_value(argv, "--speculative-num-steps")) + 1


def check_llamacpp(pair: PairFacts, result: Launch) -> None:
    argv = result.argv
    package = LLAMA["package"]
    # The llamacpp extra's console script passes what follows `--` to llama-server.
    assert argv[0] == package["script"] and argv[3] == "--" and package["passes_after_double_dash"]
    server_flags = [a for a in argv[4:] if a.startswith("-")]
    assert not set(server_flags) - set(LLAMA["server_args"]["flags"])
    spec_type = _value(argv, "--spec-type")
    assert spec_type in LLAMA["speculative"]["spec_types"]
    converts = [s for s in result.steps if s[:2] == ("drafters", "convert-hf-to-gguf")]
    assert converts and all("--outfile" in s for s in converts)
    for step in converts:
        assert not {a for a in step[2:] if a.startswith("--")} - set(LLAMA["converter"]["flags"]), step
    n_max = int(_value(argv, "--spec-draft-n-max"))
    if pair.built_in:
        exports = LLAMA["converter"][f"{pair.method}_export_architectures"]
        assert any(f"--{pair.method}" in s for s in converts)
        assert pair.target_architecture is None or pair.target_architecture in exports
    if pair.method in ("dflash", "dflash2", "dspark") and not pair.built_in:
        if pair.block_size is None:
            # llama-server clamps the bound to the block it reads from the GGUF: the whole block is drafted.
            assert LLAMA["speculative"]["block_clamps_n_max"] and n_max >= 16
        else:
            assert n_max == (pair.block_size if pair.method == "dspark" else pair.block_size - 1)
    elif pair.method in ("eagle3", "draft-lm"):
        assert n_max == LLAMA["common"]["draft_n_max_default"]


CHECKS = {"vllm": check_vllm, "sglang": check_sglang, "llamacpp": check_llamacpp}


@pytest.fixture(scope="module")
def catalog_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store.open(f"sqlite:///{tmp_path_factory.mktemp('launch') / 'registry.db'}")
    store.catalog.load_catalog()
    store.verdicts.recompute_compatibility()
    return store


def _all_pairs(store: Store) -> list[PairFacts]:
    return [p for c in store.reads.checkpoints() for p in built_in_pairs(store, c.repo_id) + exact_pairs(store, c.repo_id)]


def test_every_catalog_pair_and_engine_matches_the_engines_definitions(catalog_store: Store) -> None:
    pairs = _all_pairs(catalog_store)
    assert len(pairs) > 90
    supported = {engine: 0 for engine in ENGINES}
    refused: dict[str, list[PairFacts]] = {engine: [] for engine in ENGINES}
    for pair in pairs:
        for engine in ENGINES:
            result = launch_command(pair, engine)
            assert (result.engine, result.target, result.drafter) == (engine, pair.target, pair.drafter)
            assert result.minimum_version and result.minimum_version_source
            if not result.supported:
                assert result.reason and not result.argv, (pair, engine)
                refused[engine].append(pair)
                continue
            supported[engine] += 1
            assert result.reason is None and result.argv and result.draft_length_source
            CHECKS[engine](pair, result)
    assert all(count > 0 for count in supported.values()), supported
    # The refusals the engines' sources do not support: SGLang runs Gemma-4 assistants and DFlash without a
    # recorded block; GGUF-only drafters go to llama.cpp only; the built-in drafters get commands.
    assert not [p.drafter for p in refused["sglang"]
                if p.method in ("gemma4-assistant", "dflash", "mtp") and not p.gguf and not p.built_in]
    assert [p.drafter for p in refused["sglang"] if p.built_in] == ["XiaomiMiMo/MiMo-V2.5-Pro-FP4-DFlash"]
    gguf = [p for p in pairs if p.gguf]
    assert gguf and all(not launch_command(p, e).supported for p in gguf for e in ("vllm", "sglang"))
    built_in = [p for p in pairs if p.built_in]
    assert len(built_in) >= 17 and {p.method for p in built_in} >= {"mtp", "dspark"}
    assert all(launch_command(p, "sglang").supported for p in built_in if p.method in ("mtp", "dspark"))
    assert all(launch_command(p, "vllm").supported for p in built_in if p.method == "mtp")
    # The recorded sha of z-lab/Qwen3-8B-DFlash-b16 pins its revision.
    qwen = next(p for p in pairs if p.drafter == "z-lab/Qwen3-8B-DFlash-b16")
    assert qwen.drafter_sha == SHA and qwen.block_size == 16


def test_built_in_drafters_get_commands(catalog_store: Store) -> None:
    (v3,) = built_in_pairs(catalog_store, "deepseek-ai/DeepSeek-V3")
    assert v3.built_in and v3.method == "mtp" and v3.target == v3.drafter
    vllm = launch_command(v3, "vllm")
    assert json.loads(_value(vllm.argv, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 1}
    sglang = launch_command(v3, "sglang")
    assert _value(sglang.argv, "--speculative-algorithm") == "NEXTN"
    # llama.cpp's converter exports no MTP head of a DeepseekV3ForCausalLM checkpoint at b11434.
    assert v3.target_architecture == "DeepseekV3ForCausalLM"
    llama = launch_command(v3, "llamacpp")
    assert not llama.supported and "--mtp" in (llama.reason or "")
    (qwen,) = built_in_pairs(catalog_store, "Qwen/Qwen3.5-27B")
    printed = launch_command(qwen, "llamacpp").shell()
    assert "--mtp" in printed and "--spec-type draft-mtp" in printed
    (dspark,) = built_in_pairs(catalog_store, "deepseek-ai/DeepSeek-V4-Flash-DSpark")
    sglang = launch_command(dspark, "sglang")
    assert sglang.supported and "--speculative-draft-model-path" not in sglang.argv
    assert "--dspark" in launch_command(dspark, "llamacpp").shell()
    # vLLM serves a built-in DSpark only with num_speculative_tokens, and its block is not recorded.
    assert "block size" in (launch_command(dspark, "vllm").reason or "")
    assert launch_command(replace(dspark, block_size=8), "vllm").supported


def test_dflash_lengths_follow_the_block() -> None:
    pair = PairFacts("Qwen/Qwen3-8B", None, "z-lab/Qwen3-8B-DFlash-b16", SHA, "dflash", block_size=16)
    vllm = launch_command(pair, "vllm")
    assert json.loads(_value(vllm.argv, "--speculative-config")) == {
        "method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15, "revision": SHA}
    # A measured best γ (of this engine on this hardware) wins, but never past the block.
    shorter = launch_command(pair, "vllm", DraftLength(6, "best γ of price"))
    assert json.loads(_value(shorter.argv, "--speculative-config"))["num_speculative_tokens"] == 6
    longer = launch_command(pair, "vllm", DraftLength(40, "best γ of price"))
    assert json.loads(_value(longer.argv, "--speculative-config"))["num_speculative_tokens"] == 15
    sglang = launch_command(pair, "sglang", DraftLength(6, "best γ of price"))
    assert _value(sglang.argv, "--speculative-num-draft-tokens") == "16"  # the block, whatever γ was measured
    llama = launch_command(pair, "llamacpp")
    assert _value(llama.argv, "--spec-draft-n-max") == "15"
    unknown_block = PairFacts("t/a", None, "d/b", None, "dflash")
    sglang_unknown = launch_command(unknown_block, "sglang")
    assert sglang_unknown.supported and "--speculative-num-draft-tokens" not in sglang_unknown.argv
    assert "drafter's config" in sglang_unknown.draft_length_source
    assert not launch_command(unknown_block, "vllm").supported  # vLLM requires num_speculative_tokens
    assert int(_value(launch_command(unknown_block, "llamacpp").argv, "--spec-draft-n-max")) >= 16


def test_chain_drafters_take_each_engines_default_or_the_measured_length() -> None:
    pair = PairFacts("meta-llama/Llama-3.1-8B-Instruct", SHA, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", None, "eagle3")
    vllm = launch_command(pair, "vllm", DraftLength(5, "best γ of price on H100 SXM"))
    assert _value(vllm.argv, "--revision") == SHA
    assert json.loads(_value(vllm.argv, "--speculative-config"))["num_speculative_tokens"] == 5
    assert vllm.draft_length_source == "best γ of price on H100 SXM"
    sglang = launch_command(pair, "sglang", DraftLength(5, "best γ"))
    assert [_value(sglang.argv, f) for f in ("--speculative-num-steps", "--speculative-eagle-topk",
                                             "--speculative-num-draft-tokens")] == ["5", "1", "6"]
    llama = launch_command(pair, "llamacpp", DraftLength(5, "best γ"))
    assert llama.argv[-2:] == ("--spec-draft-n-max", "5")
    assert any("--target-model-dir" in step for step in llama.steps)
    # Nothing measured: each engine's own default, said with its source; never "the verifier's default".
    defaults = {engine: launch_command(pair, engine) for engine in ENGINES}
    assert json.loads(_value(defaults["vllm"].argv, "--speculative-config"))["num_speculative_tokens"] == 2
    assert "docs.vllm.ai" in defaults["vllm"].draft_length_source
    assert "--speculative-num-steps" not in defaults["sglang"].argv  # SGLang chooses
    assert "_auto_choose_speculative_params" in defaults["sglang"].draft_length_source
    assert _value(defaults["llamacpp"].argv, "--spec-draft-n-max") == str(LLAMA["common"]["draft_n_max_default"])
    assert "common/common.h" in defaults["llamacpp"].draft_length_source
    assert not any("verifier" in d.draft_length_source for d in defaults.values())


def test_engines_that_cannot_run_a_method_say_why() -> None:
    dflash2 = PairFacts("Qwen/Qwen3.8-27B", None, "z-lab/Qwen3.8-27B-DFlash2", None, "dflash2")
    for engine in ("vllm", "sglang"):
        result = launch_command(dflash2, engine)
        assert not result.supported and "DFlash 2" in (result.reason or "")
    assert launch_command(dflash2, "llamacpp").supported
    gguf = PairFacts("google/gemma-4-31B-it", None, "Lucebox/gemma-4-31B-it-DFlash-GGUF", None, "dflash", gguf=True)
    for engine in ("vllm", "sglang"):
        assert "GGUF" in (launch_command(gguf, engine).reason or "")
    assert launch_command(gguf, "llamacpp").supported
    assistant = PairFacts("google/gemma-4-31B-it", None, "google/gemma-4-31B-it-assistant", None, "gemma4-assistant")
    assert _value(launch_command(assistant, "sglang").argv, "--speculative-algorithm") == "NEXTN"


def test_only_the_paths_tests_run_say_they_were_run() -> None:
    tested = "checked by running it"
    for method in ("draft-lm", "dflash", "eagle3"):
        pair = PairFacts("Qwen/Qwen3-8B", None, "d/x", None, method, block_size=16 if method == "dflash" else None)
        assert any(tested in n for n in launch_command(pair, "llamacpp").notes), method
    for method in ("dspark", "gemma4-assistant"):
        pair = PairFacts("Qwen/Qwen3-8B", None, "d/x", None, method, block_size=8)
        assert not any(tested in n for n in launch_command(pair, "llamacpp").notes), method
    built_in = PairFacts("Qwen/Qwen3.5-27B", None, "Qwen/Qwen3.5-27B", None, "mtp", built_in=True)
    assert not any(tested in n for n in launch_command(built_in, "llamacpp").notes)


def test_minimum_versions_per_target_where_public() -> None:
    gemma = PairFacts("google/gemma-4-31B-it", None, "d/eagle3", None, "eagle3", target_family="Gemma-4")
    assert "#39450" in launch_command(gemma, "vllm").minimum_version
    llama = PairFacts("meta-llama/Llama-3.1-8B-Instruct", None, "d/eagle3", None, "eagle3", target_family="Llama-3.1")
    assert "#16937" in launch_command(llama, "vllm").minimum_version


def _engine_run(engine: str, hardware: str, marginal: tuple[float, ...], **changes: object) -> Run:
    overall = measured(marginal=marginal, speedup=2.0)
    values: dict[str, object] = dict(target="Qwen/Qwen3-8B", drafter="z-lab/Qwen3-8B-DFlash-b16", engine=engine,
                                     hardware=hardware, overall=overall, per_set=(overall,), draft_length=len(marginal),
                                     target_weight_bytes=16_000_000_000, run_id=None, prediction=None, lossless=True)
    values.update(changes)
    return full_run(**values)


def test_a_measured_length_comes_only_from_the_same_engine_on_the_same_hardware(tmp_path: Path) -> None:
    """16 tiny PyTorch runs on CPU never shrink the vLLM command; a vLLM run on an H100 sets the vLLM command on
    H100 SXM only, never SGLang's or another card's; a tiny stand-in recorded as vLLM on an H100 sets nothing."""
    store = Store.open(f"sqlite:///{tmp_path / 'registry.db'}")
    store.catalog.load_catalog()
    store.verdicts.recompute_compatibility(checkpoint_repo_id="Qwen/Qwen3-8B")
    (pair,) = exact_pairs(store, "Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16")
    h100, a100 = pick_gpu("H100 SXM"), pick_gpu("A100 80GB")
    for n in range(16):
        store.runs.record_run(full_run(target=pair.target, drafter=pair.drafter, prediction=None, run_id=f"tiny-{n}"))
    assert all(measured_draft_length(store, pair, h100, e) is None for e in ENGINES)
    assert json.loads(_value(launch_command(pair, "vllm").argv, "--speculative-config"))["num_speculative_tokens"] == 15
    assert side_parameters(store, pair.target, pair.target_sha)  # the real target's size is known
    store.runs.record_run(_engine_run("vllm", "NVIDIA H100 80GB HBM3", (1.0, 1.0, 1.0, 0.01, 0.01, 0.01, 0.01, 0.01)
                                      + (0.0,) * 7, run_id="tiny-vllm", target_weight_bytes=1_000_000))
    assert measured_draft_length(store, pair, h100, "vllm") is None  # a 1 MB "Qwen3-8B" is a stand-in
    store.runs.record_run(_engine_run("vllm", "NVIDIA H100 80GB HBM3", (1.0, 1.0, 1.0) + (0.0,) * 12, run_id="lossy",
                                      lossless=False))
    assert measured_draft_length(store, pair, h100, "vllm") is None  # a lossy run says nothing of the pair
    store.runs.record_run(_engine_run("vllm", "NVIDIA H100 80GB HBM3", (1.0, 1.0, 1.0) + (0.0,) * 12, run_id="real"))
    length = measured_draft_length(store, pair, h100, "vllm")
    assert length is not None and length.value == 3 and "vllm on NVIDIA H100" in length.source
    assert measured_draft_length(store, pair, a100, "vllm") is None
    assert measured_draft_length(store, pair, h100, "sglang") is None
    assert measured_draft_length(store, pair, h100, "llamacpp") is None


def test_llama_cpp_refuses_the_eagle3_layouts_its_converter_cannot_read(catalog_store: Store) -> None:
    """DeepSpec's EAGLE-3 heads: the method runs on llama.cpp, their layout does not (its converter has no such
    architecture, tests/llamacpp/test_launch_commands.py reads it); the layout comes from the repo as recorded."""
    (deepspec,) = exact_pairs(catalog_store, "Qwen/Qwen3-4B", "deepseek-ai/eagle3_qwen3_4b_ttt7")
    assert deepspec.layout == "deepspec"
    refused = launch_command(deepspec, "llamacpp")
    assert not refused.supported and not refused.argv and "Qwen3Eagle3Model" in (refused.reason or "")
    assert refused.minimum_version == "none"
    for layout in ("eagle3", "speculators", None):
        assert launch_command(replace(deepspec, layout=layout), "llamacpp").supported, layout


def test_launch_cli(database_url: str) -> None:
    drafters = functools.partial(run_drafters, env={"DRAFTERS_DATABASE_URL": database_url})

    assert drafters("catalog", "load").returncode == 0
    result = drafters("launch", "Qwen/Qwen3-8B", "--engine", "vllm", "--drafter", "z-lab/Qwen3-8B-DFlash-b16",
                      "--json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["schema_version"] == SCHEMA_VERSION and body["engine"] == "vllm"
    (launch,) = body["launches"]
    assert launch["shell"].startswith("vllm serve Qwen/Qwen3-8B")
    assert launch["draft_length"] == 15 and launch["minimum_version"] == "0.20.1"
    assert launch["rank"]["basis"] == "published" and launch["rank"]["why"].startswith("published, not measured")
    table = drafters("launch", "Qwen/Qwen3-8B", "--engine", "sglang")
    assert table.returncode == 0, table.stderr
    assert re.search(r"--speculative-algorithm DFLASH .*--speculative-num-draft-tokens 16", table.stdout)
    # Without --drafter the recommended command comes first, with why.
    assert table.stdout.startswith("recommended: z-lab/Qwen3-8B-DFlash-b16")
    built_in = drafters("launch", "deepseek-ai/DeepSeek-V3", "--engine", "vllm", "--json")
    assert built_in.returncode == 0, built_in.stderr
    (mtp,) = json.loads(built_in.stdout)["launches"]
    assert mtp["built_in"] and mtp["supported"] and '"method":"mtp"' in mtp["shell"]
    assert drafters("launch", "Qwen/Qwen3-8B", "--engine", "tensorrt").returncode == 2
    missing = drafters("launch", "nobody/nothing", "--engine", "vllm")
    assert missing.returncode == 1 and "not in the registry" in missing.stderr


YUHUILI_HEAD = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096,
                "num_hidden_layers": 1, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 12288,
                "vocab_size": 151936, "draft_vocab_size": 32000,
                "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 17, 32]}}


def test_the_eagle3_layers_llama_cpp_must_be_given() -> None:
    # yuhuili / SpecForge: layer OUTPUT ids under eagle_config, which llama.cpp's converter never reads.
    assert eagle3_converter_layers(YUHUILI_HEAD) == [2, 18, 33]
    # speculators: hidden-state indices top-level, where the converter reads them: nothing to add.
    speculators = {"speculators_model_type": "eagle3", "draft_vocab_size": 32000,
                   "transformer_layer_config": {"num_hidden_layers": 1, "hidden_size": 4096},
                   "eagle_aux_hidden_state_layer_ids": [2, 18, 33]}
    assert eagle3_converter_layers(speculators) is None
    # Written top-level once, the same head needs nothing more (the printed step converges).
    assert eagle3_converter_layers({**YUHUILI_HEAD, EAGLE3_CONVERTER_KEY: [2, 18, 33]}) is None
    # No layer ids named: the converter's default is EAGLE-3's default, which the head was trained on.
    assert eagle3_converter_layers({k: v for k, v in YUHUILI_HEAD.items() if k != "eagle_config"}) is None
    assert eagle3_converter_layers({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2}) is None


def test_the_printed_eagle3_step_writes_the_layers_the_converter_reads(tmp_path: Path) -> None:
    head = tmp_path / "EAGLE3-Qwen3-8B"
    head.mkdir()
    (head / "config.json").write_text(json.dumps(YUHUILI_HEAD))
    pair = PairFacts("Qwen/Qwen3-8B", SHA, str(head), None, "eagle3", eagle3_layers=(2, 18, 33),
                     drafter_config_read=True)
    launch = launch_command(pair, "llamacpp", local=True)
    (step,) = [s for s in launch.steps if s[:2] == ("python", "-c")]
    convert = launch.steps.index(next(s for s in launch.steps if s[:2] == CONVERTER_COMMAND and str(head) in s))
    assert launch.steps.index(step) < convert  # before the head's conversion
    subprocess.run([sys.executable, *step[1:]], check=True, timeout=60)
    written = json.loads((head / "config.json").read_text())
    assert written == {**YUHUILI_HEAD, EAGLE3_CONVERTER_KEY: [2, 18, 33]}
    assert any(EAGLE3_CONVERTER_KEY in note for note in launch.notes)
    # A head whose config the registry never read: no step, but the user is told what to check.
    unread = launch_command(PairFacts("Qwen/Qwen3-8B", SHA, "yuhuili/EAGLE3-Qwen3-8B", None, "eagle3"), "llamacpp")
    assert not [s for s in unread.steps if s[:2] == ("python", "-c")]
    assert any("has not read this head's config.json" in note for note in unread.notes)


def test_launch_reads_the_eagle3_layers_from_the_recorded_config(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'registry.db'}")
    store.catalog.load_catalog()
    drafter = "RedHatAI/Qwen3-8B-speculator.eagle3"
    store.drafters.add_drafter_revision(drafter, RevisionSpec(sha="a" * 40, config_raw=json.dumps(YUHUILI_HEAD).encode()))
    store.verdicts.recompute_compatibility(checkpoint_repo_id="Qwen/Qwen3-8B")
    (pair,) = exact_pairs(store, "Qwen/Qwen3-8B", drafter)
    assert pair.eagle3_layers == (2, 18, 33) and pair.drafter_config_read
    printed = launch_command(pair, "llamacpp").shell()
    assert '[2,18,33]' in printed and printed.index("[2,18,33]") < printed.index("--target-model-dir")


def test_the_printed_converter_command_refuses_a_folder_with_the_publishers_code(tmp_path: Path) -> None:
    """`drafters convert-hf-to-gguf` passes its arguments to llama.cpp's converter, which loads tokenizers with
    trust_remote_code: a model folder among them that carries an auto_map is refused before anything runs."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["X"], "auto_map": {"AutoModel": "x.Model"}}))
    result = run_drafters("convert-hf-to-gguf", str(folder), "--outtype", "bf16", "--outfile",
                          str(tmp_path / "model.gguf"), env={"DRAFTERS_LLAMA_CPP_DIR": str(tmp_path / "nowhere")})
    assert result.returncode != 0 and "auto_map" in result.stderr, result.stderr
    assert not (tmp_path / "model.gguf").exists()


def test_the_built_in_exports_launch_knows_are_the_converters() -> None:
    for method in ("mtp", "dspark"):
        assert BUILT_IN_EXPORT_ARCHITECTURES[method] == set(LLAMA["converter"][f"{method}_export_architectures"])
