"""DFlash v1 drafters: z-lab's published layout, agreement with transformers' own implementation, losslessness and
acceptance through the engine on the tiny target, and refusals of drafters that cannot run."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from registry.domain.run import Run
from verifier.engines.pytorch import IncompatiblePair, RunSettings, run_pair
from registry.local import read_config
from verifier.folders import LoadError
from verifier.loading import LoadedTarget
from verifier.methods.dflash.config import (
    DFlashFormatError,
    TargetGeometry,
    default_target_layer_ids,
    parse_dflash_config,
)
from verifier.methods.dflash.model import DFlashDraftModel, attention_visibility, output_numerics
from verifier.methods.dflash.muse_glimmer import MUSE_GLIMMER_RENAMES, muse_glimmer_assistant
from verifier.methods import build_proposer as build
from verifier.methods.dflash.proposer import build_proposer as build_zlab
from verifier.prompts import bundled_set, bundled_sets
from verifier.proposer import TargetOutput
from verifier.tiny.dflash import cached_dflash_drafter

MAX_NEW_TOKENS = 32


@pytest.fixture(scope="module")
def dflash_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    return cached_dflash_drafter(model_cache, tiny_target_dir, trained=True)


@pytest.fixture(scope="module")
def random_dflash_dir(model_cache: Path, tiny_target_dir: Path) -> Path:
    return cached_dflash_drafter(model_cache, tiny_target_dir, trained=False)


def _settings(**overrides: Any) -> RunSettings:
    return replace(RunSettings(max_new_tokens=MAX_NEW_TOKENS, repeats=1, warmup=0, device="cpu"), **overrides)


@pytest.fixture(scope="module")
def trained_run(tiny_target_dir: Path, dflash_dir: Path) -> Run:
    return run_pair(tiny_target_dir, dflash_dir, bundled_sets(), _settings())


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _stored_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    with safe_open(folder / "model.safetensors", framework="pt") as handle:
        return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}


# ---------------------------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------------------------


def test_builder_writes_z_lab_config(dflash_dir: Path, tiny_target: LoadedTarget) -> None:
    config = _config(dflash_dir)
    assert config["architectures"] == ["DFlashDraftModel"]
    assert "auto_map" not in config
    assert config["dflash_config"]["mask_token_id"] == tiny_target.tokenizer.convert_tokens_to_ids("<|MASK|>")
    assert config["num_target_layers"] == tiny_target.config["num_hidden_layers"]
    assert config["hidden_size"] == tiny_target.config["hidden_size"]
    assert isinstance(config["block_size"], int) and config["block_size"] > 1
    layer_ids = config["dflash_config"]["target_layer_ids"]
    assert all(0 <= i < config["num_target_layers"] for i in layer_ids)
    assert sorted(p.name for p in dflash_dir.glob("*.safetensors")) == ["model.safetensors"]
    assert not (dflash_dir / "tokenizer.model").exists()


def test_saved_weights_follow_the_published_table(dflash_dir: Path) -> None:
    # The table of dflash-format.md, written out independently of the loader's own expectations.
    c = _config(dflash_dir)
    H, L, I = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]  # noqa: E741
    nh, nkv, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    k = len(c["dflash_config"]["target_layer_ids"])
    table = {"fc.weight": (H, k * H), "hidden_norm.weight": (H,), "norm.weight": (H,)}
    for i in range(L):
        table |= {
            f"layers.{i}.self_attn.q_proj.weight": (nh * d, H),
            f"layers.{i}.self_attn.k_proj.weight": (nkv * d, H),
            f"layers.{i}.self_attn.v_proj.weight": (nkv * d, H),
            f"layers.{i}.self_attn.o_proj.weight": (H, nh * d),
            f"layers.{i}.self_attn.q_norm.weight": (d,),
            f"layers.{i}.self_attn.k_norm.weight": (d,),
            f"layers.{i}.mlp.gate_proj.weight": (I, H),
            f"layers.{i}.mlp.up_proj.weight": (I, H),
            f"layers.{i}.mlp.down_proj.weight": (H, I),
            f"layers.{i}.input_layernorm.weight": (H,),
            f"layers.{i}.post_attention_layernorm.weight": (H,),
        }
    assert _stored_shapes(dflash_dir) == table
    model = DFlashDraftModel(parse_dflash_config(c), k)
    assert {name: tuple(t.shape) for name, t in model.state_dict().items()} == table


def _prefill(target: LoadedTarget, prompt: list[int]) -> tuple[TargetOutput, object]:
    from verifier.decode import new_cache

    ids = torch.tensor(prompt)
    cache = new_cache(target.model)
    with torch.no_grad():
        out = target.model(input_ids=ids[None], cache=cache, use_cache=True, output_hidden_states=True)
    pending = int(out.logits[0, -1].argmax())
    return TargetOutput(0, ids, pending, cache, tuple(out.hidden_states)), cache


def test_drafts_match_transformers_muse_glimmer_over_two_rounds(
    dflash_dir: Path, tiny_target: LoadedTarget
) -> None:
    """z-lab's layout loads into transformers' MuseGlimmerAssistantModel with only the two documented renames, and our
    proposer's drafted logits equal that implementation's on the same target states, cache included."""
    from transformers.cache_utils import DFlashCache

    target = tiny_target.model
    hf = muse_glimmer_assistant(
        dflash_dir, target.config.num_hidden_layers, device=torch.device("cpu"), dtype=torch.float32
    )
    stored = set(_stored_shapes(dflash_dir))
    assert {MUSE_GLIMMER_RENAMES.get(name, name) for name in stored} == set(hf.state_dict())
    assert set(MUSE_GLIMMER_RENAMES) <= stored

    proposer = build("dflash", dflash_dir, tiny_target, _settings())
    config = _config(dflash_dir)
    block, mask_id = config["block_size"], config["dflash_config"]["mask_token_id"]
    layer_ids = config["dflash_config"]["target_layer_ids"]
    prompt = tiny_target.tokenizer("What is 9 times 7?")["input_ids"]
    first, target_cache = _prefill(tiny_target, prompt)
    proposer.begin(torch.tensor(prompt), first)
    hf_cache = DFlashCache(config=hf.config)
    hf_cache.activate_past_recording()

    def reference_logits(view: TargetOutput, anchor_position: int, crop: bool) -> torch.Tensor:
        context = torch.cat([view.hidden_states[i + 1] for i in layer_ids], dim=-1)
        noise = target.get_input_embeddings()(torch.tensor([[view.pending_token] + [mask_id] * (block - 1)]))
        if crop:
            hf_cache.crop(-block)
        hf_cache.set_previous_accepted_tokens(context.shape[1])
        positions = torch.arange(view.start, anchor_position + block)[None]
        hidden = hf(noise_embeds=noise, context_hidden_states=context, position_ids=positions, cache=hf_cache)
        return target.get_output_embeddings()(hidden.last_hidden_state[0, 1:])

    with torch.no_grad():
        ours = proposer.draft_logits()
        theirs = reference_logits(first, first.end, crop=False)
        assert ours.shape == (block - 1, target.config.vocab_size)
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)

        # Round two: the target commits [pending, 2 drafts] and picks the next pending token.
        committed = torch.tensor([first.pending_token, *ours[:2].argmax(-1).tolist()])
        out = target(input_ids=committed[None], cache=target_cache, use_cache=True, output_hidden_states=True)
        pending = int(out.logits[0, -1].argmax())
        second = TargetOutput(first.end, committed, pending, target_cache, tuple(out.hidden_states))
        proposer.observe(2, torch.tensor([*committed[1:].tolist(), second.pending_token]), second)
        ours = proposer.draft_logits()
        theirs = reference_logits(second, second.end, crop=True)
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Through the engine
# ---------------------------------------------------------------------------------------------------------------


def test_greedy_output_equals_plain_decoding_on_every_bundled_prompt(trained_run: Run, dflash_dir: Path) -> None:
    assert trained_run.method == "dflash"
    assert trained_run.first_divergence is None
    assert trained_run.lossless is True
    assert all(result.lossless for result in trained_run.per_set)
    assert len(trained_run.generations) == sum(len(s.prompts) for s in bundled_sets())
    assert trained_run.draft_length == _config(dflash_dir)["block_size"] - 1


def test_trained_drafter_accepts_clearly_more_than_a_random_one(
    trained_run: Run, tiny_target_dir: Path, random_dflash_dir: Path
) -> None:
    math_set = bundled_set("math")
    untrained = run_pair(tiny_target_dir, random_dflash_dir, [math_set], _settings())
    trained_tau = next(r for r in trained_run.per_set if r.name == "math").acceptance.tau
    untrained_tau = untrained.overall.acceptance.tau
    assert untrained.lossless is True
    assert untrained_tau < 1.3
    assert trained_tau > untrained_tau + 1.0
    assert trained_run.overall.acceptance.tau > 2.0


def test_shorter_draft_length_is_honoured(dflash_dir: Path, tiny_target: LoadedTarget) -> None:
    proposer = build("dflash", dflash_dir, tiny_target, _settings(draft_length=3))
    first, _ = _prefill(tiny_target, tiny_target.tokenizer("What is 27 plus 18?")["input_ids"])
    proposer.begin(first.input_ids, first)
    assert proposer.draft_length == 3
    assert proposer.propose(0.0, torch.Generator()).k == 3


def test_sampled_proposals_carry_their_distributions(dflash_dir: Path, tiny_target: LoadedTarget) -> None:
    proposals = []
    for _ in range(2):
        proposer = build("dflash", dflash_dir, tiny_target, _settings())
        first, _ = _prefill(tiny_target, tiny_target.tokenizer("Tell me about rivers.")["input_ids"])
        proposer.begin(first.input_ids, first)
        proposals.append(proposer.propose(0.8, torch.Generator().manual_seed(7)))
    proposal = proposals[0]
    assert proposal.q_probs is not None
    assert proposal.q_probs.shape == (proposal.k, tiny_target.config["vocab_size"])
    torch.testing.assert_close(proposal.q_probs.sum(-1), torch.ones(proposal.k))
    assert all(proposal.q_probs[i, t] > 0 for i, t in enumerate(proposal.tokens.tolist()))
    assert torch.equal(proposals[0].tokens, proposals[1].tokens)  # the generator drives every choice


# ---------------------------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------------------------


def _write_drafter(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    model = DFlashDraftModel(parse_dflash_config(config), len(config["dflash_config"]["target_layer_ids"]))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors")
    return folder


def test_hidden_size_mismatch_is_refused(
    tmp_path: Path, dflash_dir: Path, tiny_target_dir: Path, tiny_target: LoadedTarget
) -> None:
    config = _config(dflash_dir) | {"hidden_size": 64, "head_dim": 16, "intermediate_size": 128}
    narrow = _write_drafter(tmp_path / "narrow", config)
    with pytest.raises(IncompatiblePair) as refused:
        run_pair(tiny_target_dir, narrow, [bundled_set("math")], _settings())
    assert any("hidden_size" in reason for reason in refused.value.reasons)
    with pytest.raises(IncompatiblePair) as refused_by_method:
        build("dflash", narrow, tiny_target, _settings())
    assert any("hidden_size 64" in reason and "96" in reason for reason in refused_by_method.value.reasons)


def test_layer_ids_beyond_the_target_are_refused(tmp_path: Path, dflash_dir: Path, tiny_target: LoadedTarget) -> None:
    config = _config(dflash_dir)
    config["dflash_config"] = config["dflash_config"] | {"target_layer_ids": [1, 9]}
    with pytest.raises(IncompatiblePair, match=r"target_layer_ids \[9\]"):
        build("dflash", _write_drafter(tmp_path / "deep", config), tiny_target, _settings())


def test_weights_outside_the_layout_are_refused_by_name(
    tmp_path: Path, dflash_dir: Path, tiny_target: LoadedTarget
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(dflash_dir, broken)
    with safe_open(dflash_dir / "model.safetensors", framework="pt") as handle:
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    del tensors["layers.0.self_attn.k_norm.weight"]
    tensors["embed_tokens.weight"] = torch.zeros(3, 3)
    tensors["fc.weight"] = tensors["fc.weight"][:, :10].contiguous()
    save_file(tensors, broken / "model.safetensors")
    with pytest.raises(DFlashFormatError) as refused:
        build_zlab(broken, tiny_target, _settings(), read_config(broken))  # z-lab's builder itself: its layout is not detected again
    message = str(refused.value)
    assert "missing tensor layers.0.self_attn.k_norm.weight" in message
    assert "unexpected tensor embed_tokens.weight" in message
    assert "fc.weight has shape [96, 10]" in message


def test_pickle_only_and_dflash2_drafters_are_refused(
    tmp_path: Path, dflash_dir: Path, tiny_target: LoadedTarget
) -> None:
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copyfile(dflash_dir / "config.json", pickled / "config.json")
    (pickled / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(LoadError, match="pickle"):
        build("dflash", pickled, tiny_target, _settings())
    with pytest.raises(DFlashFormatError, match="DFlash2DraftModel"):
        parse_dflash_config(_config(dflash_dir) | {"architectures": ["DFlash2DraftModel"]})


# ---------------------------------------------------------------------------------------------------------------
# Config variants (pure)
# ---------------------------------------------------------------------------------------------------------------

QWEN3_4B_DFLASH = {
    "architectures": ["DFlashDraftModel"],
    "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
    "model_type": "qwen3",
    "block_size": 16,
    "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]},
    "num_target_layers": 36,
    "num_hidden_layers": 5,
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "layer_types": ["full_attention"] * 5,
    "sliding_window": None,
    "use_sliding_window": False,
    "rope_theta": 1000000,
    "rope_scaling": None,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-06,
}


def test_published_qwen3_config_reads_as_published() -> None:
    config = parse_dflash_config(QWEN3_4B_DFLASH)
    assert (config.block_size, config.mask_token_id, config.target_layer_ids) == (16, 151669, (1, 9, 17, 25, 33))
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (32, 8, 128)
    assert config.rope_theta == 1e6 and config.sliding_window is None
    assert not any(config.is_causal_layer(i) for i in range(5))


def test_rope_parameters_and_top_level_dflash_fields_are_accepted() -> None:
    exported = {k: v for k, v in QWEN3_4B_DFLASH.items() if k not in ("rope_theta", "dflash_config")}
    exported |= {"rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}, "mask_token_id": 7,
                 "target_layer_ids": [2, 4]}  # fmt: skip
    config = parse_dflash_config(exported)
    assert (config.rope_theta, config.mask_token_id, config.target_layer_ids) == (1e6, 7, (2, 4))
    with pytest.raises(DFlashFormatError, match="yarn"):
        parse_dflash_config(exported | {"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6}})


@pytest.mark.parametrize(
    ("target_layers", "count", "expected"),
    [(36, 5, (1, 9, 17, 25, 33)), (40, 5, (1, 10, 19, 28, 37)), (64, 5, (1, 16, 31, 46, 61)),
     (61, 6, (1, 12, 24, 35, 47, 58)), (60, 6, (1, 12, 23, 35, 46, 57)), (24, 1, (12,))],
)  # fmt: skip
def test_default_layer_spacing_reproduces_published_ids(target_layers: int, count: int, expected: tuple) -> None:
    assert default_target_layer_ids(target_layers, count) == expected
    without_ids = {k: v for k, v in QWEN3_4B_DFLASH.items() if k != "dflash_config"} | {"num_hidden_layers": count}
    without_ids |= {"num_target_layers": target_layers, "layer_types": ["full_attention"] * count}
    assert parse_dflash_config(without_ids).layer_ids_for(target_layers) == expected


def test_sliding_layers_are_causal_within_their_window() -> None:
    config = parse_dflash_config(
        QWEN3_4B_DFLASH | {"layer_types": ["sliding_attention"] * 4 + ["full_attention"], "sliding_window": 2,
                           "use_sliding_window": True}
    )  # fmt: skip
    assert config.sliding_window == 2 and config.is_causal_layer(0) and not config.is_causal_layer(4)
    visible = attention_visibility(torch.tensor([5, 6]), torch.arange(7), causal=True, window=2)
    assert visible is not None
    assert visible.nonzero().tolist() == [[0, 4], [0, 5], [1, 5], [1, 6]]
    assert attention_visibility(torch.tensor([5, 6]), torch.arange(7), causal=False, window=None) is None


def test_a_window_wider_than_the_text_changes_nothing() -> None:
    small = {"architectures": ["DFlashDraftModel"], "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 64, "block_size": 4,
             "dflash_config": {"mask_token_id": 3, "target_layer_ids": [0, 1]}}  # fmt: skip
    full = DFlashDraftModel(parse_dflash_config(small), 2)
    windowed_config = small | {"layer_types": ["sliding_attention"] * 2, "sliding_window": 1000,
                               "use_sliding_window": True, "is_causal": False}  # fmt: skip
    windowed = DFlashDraftModel(parse_dflash_config(windowed_config), 2)
    windowed.load_state_dict(full.state_dict())
    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 32), torch.arange(6, 10), torch.randn(1, 6, 64), torch.arange(6))
    with torch.no_grad():
        torch.testing.assert_close(windowed(*inputs), full(*inputs))
        causal = DFlashDraftModel(parse_dflash_config(windowed_config | {"is_causal": True}), 2)
        causal.load_state_dict(full.state_dict())
        assert not torch.allclose(causal(*inputs), full(*inputs))


def test_gemma_targets_get_gemma_numerics() -> None:
    config = parse_dflash_config(QWEN3_4B_DFLASH)
    gemma = TargetGeometry("gemma4_text", 2560, 36, 262144, final_logit_softcapping=30.0)
    qwen = TargetGeometry("qwen3", 2560, 36, 151936, final_logit_softcapping=None)
    assert output_numerics(config, gemma).embedding_scale == pytest.approx(math.sqrt(2560))
    assert output_numerics(config, gemma).logit_softcap == 30.0
    assert output_numerics(config, qwen).embedding_scale == 1.0 and output_numerics(config, qwen).logit_softcap is None
    scaled = {"mask_token_id": 4, "target_layer_ids": [1], "input_embedding_scale": 2.0}
    explicit = parse_dflash_config(QWEN3_4B_DFLASH | {"dflash_config": scaled})
    assert output_numerics(explicit, gemma).embedding_scale == 2.0


def test_a_builder_takes_the_draft_length_resolved_once_and_never_clamps_it_again(
    dflash_dir: Path, tiny_target: LoadedTarget
) -> None:
    with pytest.raises(ValueError, match="resolved before a proposer is built"):
        build_zlab(dflash_dir, tiny_target, _settings(), read_config(dflash_dir))  # unresolved: the builder has no default of its own
    clamped = build("dflash", dflash_dir, tiny_target, _settings(draft_length=999))
    assert clamped.draft_length == _config(dflash_dir)["block_size"] - 1
