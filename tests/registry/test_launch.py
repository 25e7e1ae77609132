"""`drafters launch`: every exact pair of the catalog gets a command per engine, or the reason there is none; the
vLLM and SGLang commands use only flags and config keys those engines define at a pinned source commit
(tests/data/engine_sources.json, names extracted from their own source), never our own templates."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from registry.calibration.launch_inputs import exact_pairs
from registry.domain.json_shapes import SCHEMA_VERSION
from registry.domain.launch import ENGINES, DraftLength, PairFacts, launch_command
from registry.domain.llama_commands import CONVERTER, EAGLE3_CONVERTER_KEY, eagle3_converter_layers
from registry.domain.records import RevisionSpec
from registry.store import Store
from registry.store.catalog_import import load_catalog
from tests.support.cli import drafters as run_drafters

SOURCES = json.loads((Path(__file__).resolve().parents[1] / "data" / "engine_sources.json").read_text())
VLLM = SOURCES["vllm"]
SGLANG = SOURCES["sglang"]["server_args"]
SHA = "9b41424b7109f9c5413454f481b09a82b85333f4"


def _flags(argv: tuple[str, ...]) -> list[str]:
    return [a for a in argv if a.startswith("--")]


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def check_vllm(argv: tuple[str, ...]) -> dict:
    assert argv[:2] == ("vllm", "serve")
    unknown = set(_flags(argv)) - set(VLLM["engine_args"]["flags"])
    assert not unknown, f"flags vLLM's arg_utils.py does not define: {unknown}"
    config = json.loads(_value(argv, "--speculative-config"))
    unknown_keys = set(config) - set(VLLM["speculative_config"]["keys"])
    assert not unknown_keys, f"keys SpeculativeConfig does not define: {unknown_keys}"
    assert config["method"] in VLLM["speculative_config"]["methods"]
    return config


def check_sglang(argv: tuple[str, ...]) -> None:
    assert argv[:3] == ("python", "-m", "sglang.launch_server")
    unknown = set(_flags(argv)) - set(SGLANG["flags"])
    assert not unknown, f"flags SGLang's server_args.py does not define: {unknown}"
    assert _value(argv, "--speculative-algorithm") in SGLANG["algorithms"]


@pytest.fixture(scope="module")
def catalog_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store.open(f"sqlite:///{tmp_path_factory.mktemp('launch') / 'registry.db'}")
    load_catalog(store)
    store.verdicts.recompute_compatibility()
    return store


def test_every_exact_pair_of_the_catalog_gets_a_command_or_a_reason(catalog_store: Store) -> None:
    pairs = [p for c in catalog_store.reads.checkpoints() for p in exact_pairs(catalog_store, c.repo_id)]
    assert len(pairs) > 20
    supported = {engine: 0 for engine in ENGINES}
    for pair in pairs:
        for engine in ENGINES:
            result = launch_command(pair, engine)
            assert (result.engine, result.target, result.drafter) == (engine, pair.target, pair.drafter)
            assert result.minimum_version and result.minimum_version_source
            if not result.supported:
                assert result.reason and not result.argv, (pair, engine)
                continue
            supported[engine] += 1
            assert result.reason is None and result.argv
            if engine == "vllm":
                config = check_vllm(result.argv)
                assert config["model"] == pair.drafter
                assert config.get("revision") == pair.drafter_sha
                if pair.method == "dflash" and pair.block_size:
                    assert config["num_speculative_tokens"] == pair.block_size - 1
            elif engine == "sglang":
                check_sglang(result.argv)
                if pair.drafter_sha:
                    assert _value(result.argv, "--speculative-draft-model-revision") == pair.drafter_sha
                if pair.method == "dflash":
                    # A DFLASH block that differs from num-draft-tokens runs silently wrong.
                    assert int(_value(result.argv, "--speculative-num-draft-tokens")) == pair.block_size
            else:
                assert result.argv[0] == "llama-server"
                assert _value(result.argv, "--spec-type") in SOURCES["llamacpp"]["server"]["spec_types"]
                converts = [s for s in result.steps if "convert_hf_to_gguf.py" in s]
                assert converts and all("--outfile" in s for s in converts)
    assert all(count > 0 for count in supported.values()), supported
    # The recorded sha of z-lab/Qwen3-8B-DFlash-b16 pins its revision.
    qwen = next(p for p in pairs if p.drafter == "z-lab/Qwen3-8B-DFlash-b16")
    assert qwen.drafter_sha == SHA and qwen.block_size == 16


def test_dflash_lengths_follow_the_block() -> None:
    pair = PairFacts("Qwen/Qwen3-8B", None, "z-lab/Qwen3-8B-DFlash-b16", SHA, "dflash", block_size=16)
    vllm = launch_command(pair, "vllm")
    assert json.loads(_value(vllm.argv, "--speculative-config")) == {
        "method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 15, "revision": SHA}
    # A measured best γ wins, but never past the block.
    shorter = launch_command(pair, "vllm", DraftLength(6, "best γ of price"))
    assert json.loads(_value(shorter.argv, "--speculative-config"))["num_speculative_tokens"] == 6
    longer = launch_command(pair, "vllm", DraftLength(40, "best γ of price"))
    assert json.loads(_value(longer.argv, "--speculative-config"))["num_speculative_tokens"] == 15
    sglang = launch_command(pair, "sglang", DraftLength(6, "best γ of price"))
    assert _value(sglang.argv, "--speculative-num-draft-tokens") == "16"  # the block, whatever γ was measured
    unknown_block = launch_command(PairFacts("t/a", None, "d/b", None, "dflash"), "sglang")
    assert not unknown_block.supported and "block size" in (unknown_block.reason or "")


def test_chain_drafters_take_the_measured_length() -> None:
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


def test_engines_that_cannot_run_a_method_say_why() -> None:
    dflash2 = PairFacts("Qwen/Qwen3.8-27B", None, "z-lab/Qwen3.8-27B-DFlash2", None, "dflash2")
    for engine in ("vllm", "sglang"):
        result = launch_command(dflash2, engine)
        assert not result.supported and "DFlash 2" in (result.reason or "")
    assert launch_command(dflash2, "llamacpp").supported
    built_in = PairFacts("deepseek-ai/DeepSeek-V4-Flash", None, "deepseek-ai/DeepSeek-V4-Flash-DSpark", None, "dspark",
                         built_in=True)
    assert "inside the checkpoint" in (launch_command(built_in, "vllm").reason or "")


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
    table = drafters("launch", "Qwen/Qwen3-8B", "--engine", "sglang")
    assert table.returncode == 0, table.stderr
    assert re.search(r"--speculative-algorithm DFLASH .*--speculative-num-draft-tokens 16", table.stdout)
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
    convert = launch.steps.index(next(s for s in launch.steps if s[1] == CONVERTER and str(head) in s))
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
    load_catalog(store)
    drafter = "RedHatAI/Qwen3-8B-speculator.eagle3"
    store.drafters.add_drafter_revision(drafter, RevisionSpec(sha="a" * 40, config_raw=json.dumps(YUHUILI_HEAD).encode()))
    store.verdicts.recompute_compatibility(checkpoint_repo_id="Qwen/Qwen3-8B")
    (pair,) = exact_pairs(store, "Qwen/Qwen3-8B", drafter)
    assert pair.eagle3_layers == (2, 18, 33) and pair.drafter_config_read
    printed = launch_command(pair, "llamacpp").shell()
    assert '[2,18,33]' in printed and printed.index("[2,18,33]") < printed.index("--target-model-dir")
