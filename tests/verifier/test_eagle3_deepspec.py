"""DeepSpec's EAGLE-3 layout (`Qwen3Eagle3Model`, deepseek-ai/eagle3_qwen3_*_ttt7): read from its config and tensor
names, checked against a forward written from DeepSpec's public modeling (deepspec/modeling/eagle3/qwen3), run
losslessly through the engine, and refused where it does not fit."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding

from registry.domain.compat import check_pair
from registry.domain.drafter_facts import detect_method
from registry.domain.coverage import DEEPSPEC, DEEPSPEC_GEMMA4, PYTORCH, coverage
from verifier.decode import new_cache
from verifier.engines.pytorch import RunSettings, run_pair
from registry.local import read_config
from verifier.loading import LoadedTarget
from verifier.methods.eagle3.config import (
    DEEPSPEC_LAYOUT,
    Eagle3FormatError,
    compatibility_problems,
    parse_eagle3_config,
    target_shape,
)
from verifier.methods.eagle3.proposer import build_proposer, load_eagle3
from verifier.prompts import bundled_set
from verifier.proposer import TargetOutput

LAYER_IDS = [0, 1, 2]  # DeepSpec trains five on a 36-layer target; the tiny target has four layers
TTT_LENGTH = 4


def _settings(**overrides: Any) -> RunSettings:
    return replace(RunSettings(max_new_tokens=24, repeats=1, warmup=0, device="cpu"), **overrides)


def build_deepspec_head(target_dir: Path, out: Path, *, seed: int = 0) -> Path:
    """A random head saved as DeepSpec saves one: the target's config with its own fields, and Qwen3Eagle3Model's
    state dict (embed_tokens and lm_head start from the target's, as DeepSpec's trainer initialises them)."""
    target = read_config(target_dir)
    hidden, heads, kv_heads, head_dim = (target[k] for k in ("hidden_size", "num_attention_heads",
                                                             "num_key_value_heads", "head_dim"))
    inter, vocab = target["intermediate_size"], target["vocab_size"]
    config = {**target, "architectures": ["Qwen3Eagle3Model"], "num_hidden_layers": 1,
              "layer_types": ["full_attention"], "num_target_layers": target["num_hidden_layers"],
              "target_layer_ids": LAYER_IDS, "ttt_length": TTT_LENGTH, "step_loss_decay": 0.8,
              "draft_num_hidden_layers": 1, "tie_word_embeddings": False,
              "target_model_name_or_path": str(target_dir)}
    target_weights = load_file(target_dir / "model.safetensors")
    embed = target_weights["model.embed_tokens.weight"]
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.08

    def norm(width: int) -> torch.Tensor:
        return 1 + torch.randn(width, generator=generator) * 0.1

    prefix = "layers.0."
    tensors = {
        "embed_tokens.weight": embed.clone(),
        "lm_head.weight": target_weights.get("lm_head.weight", embed).clone(),
        "fc.weight": randn(hidden, len(LAYER_IDS) * hidden),
        "norm.weight": norm(hidden),
        prefix + "hidden_norm.weight": norm(hidden),
        prefix + "input_layernorm.weight": norm(hidden),
        prefix + "post_attention_layernorm.weight": norm(hidden),
        prefix + "self_attn.q_proj.weight": randn(heads * head_dim, 2 * hidden),
        prefix + "self_attn.k_proj.weight": randn(kv_heads * head_dim, 2 * hidden),
        prefix + "self_attn.v_proj.weight": randn(kv_heads * head_dim, 2 * hidden),
        prefix + "self_attn.o_proj.weight": randn(hidden, heads * head_dim),
        prefix + "self_attn.q_norm.weight": norm(head_dim),
        prefix + "self_attn.k_norm.weight": norm(head_dim),
        prefix + "mlp.gate_proj.weight": randn(inter, hidden),
        prefix + "mlp.up_proj.weight": randn(inter, hidden),
        prefix + "mlp.down_proj.weight": randn(hidden, inter),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file({name: t.contiguous() for name, t in tensors.items()}, out / "model.safetensors")
    return out


@pytest.fixture(scope="module")
def deepspec_head(tmp_path_factory: pytest.TempPathFactory, tiny_target_dir: Path) -> Path:
    return build_deepspec_head(tiny_target_dir, tmp_path_factory.mktemp("deepspec") / "eagle3_tiny_ttt4")


# ---------------------------------------------------------------------------------------------------------------
# DeepSpec's forward, written down from deepspec/modeling/eagle3/qwen3/modeling.py (Qwen3Eagle3Model) and its
# evaluator: row i pairs the fused outputs of the target layers at position i with the token at i + 1, RoPE at i;
# the decoder layer normalises the embedding (input_layernorm) and the state (hidden_norm), attends over both, adds
# the raw state as residual; chained steps feed the raw layer output back; logits = lm_head(norm(h)).
# ---------------------------------------------------------------------------------------------------------------


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def reference_layer(w: dict[str, torch.Tensor], config: dict[str, Any], states: torch.Tensor, embeds: torch.Tensor,
                    positions: torch.Tensor) -> torch.Tensor:
    """One full causal pass of the decoder layer over rows [T, H] (no cache)."""
    eps, heads, kv_heads, head_dim = (config[k] for k in ("rms_norm_eps", "num_attention_heads",
                                                         "num_key_value_heads", "head_dim"))
    p = "layers.0."
    x = torch.cat([_rms(embeds, w[p + "input_layernorm.weight"], eps), _rms(states, w[p + "hidden_norm.weight"], eps)], -1)
    rows = x.shape[0]
    q = (x @ w[p + "self_attn.q_proj.weight"].T).view(rows, heads, head_dim)
    k = (x @ w[p + "self_attn.k_proj.weight"].T).view(rows, kv_heads, head_dim)
    v = (x @ w[p + "self_attn.v_proj.weight"].T).view(rows, kv_heads, head_dim)
    q, k = _rms(q, w[p + "self_attn.q_norm.weight"], eps), _rms(k, w[p + "self_attn.k_norm.weight"], eps)
    rotary = Qwen3RotaryEmbedding(Qwen3Config(**{k: v for k, v in config.items() if k != "architectures"}))
    cos, sin = rotary(x, positions[None])
    cos, sin = cos[0][:, None], sin[0][:, None]
    q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    groups = heads // kv_heads
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    attended = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True)
    h = states + attended.transpose(0, 1).reshape(rows, -1) @ w[p + "self_attn.o_proj.weight"].T
    m = _rms(h, w[p + "post_attention_layernorm.weight"], eps)
    m = (F.silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    return h + m


def reference_chain(folder: Path, hidden_states: tuple[torch.Tensor, ...], prompt: torch.Tensor, first: int,
                    steps: int) -> list[torch.Tensor]:
    """Greedy chain logits by full recomputation: the prompt rows, then one row per drafted token."""
    config, w = read_config(folder), load_file(folder / "model.safetensors")
    fused = torch.cat([hidden_states[i + 1][0] for i in config["target_layer_ids"]], dim=-1)
    states = fused @ w["fc.weight"].T
    tokens = torch.cat([prompt[1:], torch.tensor([first])])
    logits: list[torch.Tensor] = []
    for _ in range(steps):
        out = reference_layer(w, config, states, w["embed_tokens.weight"][tokens], torch.arange(tokens.shape[0]))
        logits.append(_rms(out[-1], w["norm.weight"], config["rms_norm_eps"]) @ w["lm_head.weight"].T)
        states = torch.cat([states, out[-1:]])  # the raw output is fed back
        tokens = torch.cat([tokens, logits[-1].argmax()[None]])
    return logits


# ---------------------------------------------------------------------------------------------------------------


def test_the_config_reads_as_deepspec(deepspec_head: Path) -> None:
    raw = read_config(deepspec_head)
    config = parse_eagle3_config(raw)
    assert config.layout == DEEPSPEC_LAYOUT and config.has_qk_norm
    assert config.aux_hidden_state_indices == (1, 2, 3)  # DeepSpec reads hidden_states[layer_id + 1]
    assert config.speculative_tokens == TTT_LENGTH and config.draft_vocab_size == config.vocab_size
    assert config.position_offset == 0 and not config.norm_output
    assert detect_method(raw) == "eagle3"
    assert coverage("eagle3", raw, "someone/renamed").layout == DEEPSPEC


def test_drafted_logits_match_deepspecs_forward(deepspec_head: Path, tiny_target: LoadedTarget) -> None:
    proposer = build_proposer(deepspec_head, tiny_target, _settings(), read_config(deepspec_head))
    ids = torch.tensor(tiny_target.tokenizer("Tell me about rivers and the sea.")["input_ids"])
    with torch.no_grad():
        out = tiny_target.model(input_ids=ids[None], cache=new_cache(tiny_target.model), output_hidden_states=True)
    first = int(out.logits[0, -1].argmax())
    proposer.begin(ids, TargetOutput(0, ids, first, None, tuple(out.hidden_states)))
    proposal = proposer.propose(0.0, torch.Generator())

    with torch.no_grad():
        expected = reference_chain(deepspec_head, tuple(out.hidden_states), ids, first, TTT_LENGTH)
    assert proposal.k == TTT_LENGTH
    for ours, theirs in zip(proposer.last_logits, expected, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
    assert proposal.tokens.tolist() == [int(row.argmax()) for row in expected]


def test_a_deepspec_head_runs_losslessly(deepspec_head: Path, tiny_target_dir: Path) -> None:
    run = run_pair(tiny_target_dir, deepspec_head, [bundled_set("math")], _settings())
    assert run.method == "eagle3" and run.draft_length == TTT_LENGTH
    assert run.lossless is True and run.first_divergence is None


def test_the_registry_checks_the_same_layer_ids(deepspec_head: Path, tiny_target: LoadedTarget) -> None:
    """`drafters check` (registry.compat) and the verifier refuse the same fused layers."""
    target = read_config(tiny_target.path)
    for layer_ids, fits in (([0, 1, 2], True), ([0, 1, 4], False)):
        drafter = {**read_config(deepspec_head), "target_layer_ids": layer_ids}
        verdict = check_pair(drafter, target, drafter_method=None, target_repo_id=None, declared_targets=())
        problems = compatibility_problems(parse_eagle3_config(drafter), target_shape(tiny_target.model))
        assert (verdict.verdict == "incompatible") == bool(problems) == (not fits), (verdict, problems)


def test_unknown_tensor_names_are_refused_by_name(deepspec_head: Path, tmp_path: Path) -> None:
    folder = tmp_path / "renamed"
    shutil.copytree(deepspec_head, folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["model.layers.0.self_attn.q_proj.weight"] = tensors.pop("layers.0.self_attn.q_proj.weight")
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(Eagle3FormatError) as refused:
        load_eagle3(folder, parse_eagle3_config(read_config(folder)), 3, device=torch.device("cpu"),
                    dtype=torch.float32)
    assert "model.layers.0.self_attn.q_proj.weight" in str(refused.value)
    assert "missing tensor layers.0.self_attn.q_proj.weight" in str(refused.value)


def test_heads_without_a_reference_decode_are_refused_with_the_reason(deepspec_head: Path) -> None:
    raw = read_config(deepspec_head)
    with pytest.raises(Eagle3FormatError, match="single-layer heads only"):
        parse_eagle3_config({**raw, "num_hidden_layers": 2, "draft_num_hidden_layers": 2})
    with pytest.raises(Eagle3FormatError, match="Gemma-4 EAGLE-3 head"):
        parse_eagle3_config({**raw, "architectures": ["Gemma4Eagle3Model"]})
    gemma = coverage("eagle3", None, "deepseek-ai/eagle3_gemma4_12b_ttt7")
    assert gemma.layout == DEEPSPEC_GEMMA4 and not gemma.runnable
    assert coverage("eagle3", None, "deepseek-ai/eagle3_qwen3_8b_ttt7").engines == (PYTORCH,)
