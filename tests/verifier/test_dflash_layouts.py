"""DFlash drafters in the speculators layout (fixtures made by the `speculators` package itself with
tests/reference/dflash_speculators.py) and in DeepSpec's layout, on z-lab's draft model."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from verifier.engines.pytorch import RunSettings, run_pair
from registry.local import read_config
from verifier.methods.dflash.config import DFlashFormatError, parse_dflash_config
from verifier.methods.dflash.proposer import read_drafter_weights
from verifier.methods.dflash.layouts import (
    DEEPSPEC,
    SPECULATORS,
    Z_LAB,
    detect_layout,
    draft_vocab_map,
    load_backbone,
    stored_tensor_names,
    zlab_config,
)
from verifier.prompts import bundled_set

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "dflash"


def _settings(**overrides: object) -> RunSettings:
    return replace(RunSettings(max_new_tokens=16, repeats=1, warmup=0, device="cpu"), **overrides)


@pytest.mark.parametrize("variant", ["speculators-dflash", "speculators-dflash-tiny-target"])
def test_speculators_drafter_matches_the_package_forward(variant: str) -> None:
    """One block anchored mid-sequence: every slot's logits equal the package's own DFlashDraftModel."""
    folder = FIXTURES / variant
    raw = read_config(folder)
    assert detect_layout(raw, stored_tensor_names(folder)) == SPECULATORS
    config = parse_dflash_config(zlab_config(raw))
    assert config.target_layer_ids == (0, 2)  # hidden-state indices [1, 3] of the speculators config
    tensors = read_drafter_weights(folder)
    model = load_backbone(folder, tensors, config, 2, SPECULATORS, device=torch.device("cpu"), dtype=torch.float32)
    reference = load_file(FIXTURES / f"{variant}.reference.safetensors")
    anchor, ids = int(reference["anchor"]), reference["input_ids"][0]
    block = torch.full((config.block_size,), config.mask_token_id)
    block[0] = ids[anchor]
    with torch.no_grad():
        hidden = model(
            reference["target_embedding"][block][None],
            torch.arange(anchor, anchor + config.block_size),
            reference["hidden_states"][:, :anchor],
            torch.arange(anchor),
        )
        logits = hidden[0] @ tensors["lm_head.weight"].T
    torch.testing.assert_close(logits, reference["logits"], atol=1e-5, rtol=1e-5)
    to_target = draft_vocab_map(tensors, int(raw["transformer_layer_config"]["vocab_size"]))
    assert to_target is not None and bool(read_drafter_weights(folder)["t2d"][to_target].all())


def test_the_package_drafter_runs_losslessly_on_the_tiny_target(tiny_target_dir: Path) -> None:
    run = run_pair(tiny_target_dir, FIXTURES / "speculators-dflash-tiny-target", [bundled_set("math")], _settings())
    assert run.method == "dflash"
    assert run.lossless is True and run.first_divergence is None
    assert run.draft_length == 3


def test_sampled_drafts_come_from_the_reduced_vocabulary(tiny_target_dir: Path) -> None:
    run = run_pair(
        tiny_target_dir, FIXTURES / "speculators-dflash-tiny-target", [bundled_set("math")],
        _settings(temperature=0.8, seed=5),
    )  # fmt: skip
    assert run.method == "dflash"
    assert run.overall.acceptance.tau >= 1.0


def test_deepspec_layout_uses_its_own_embedding_and_head(tmp_path: Path, tiny_target_dir: Path) -> None:
    """DeepSpec's DFlash checkpoints carry embed_tokens/lm_head beside z-lab's backbone; they load and run."""
    from verifier.tiny.dflash import cached_dflash_drafter

    zlab = cached_dflash_drafter(tiny_target_dir.parent, tiny_target_dir, trained=False)
    folder = tmp_path / "deepspec"
    shutil.copytree(zlab, folder)
    tensors = load_file(folder / "model.safetensors")
    target = load_file(tiny_target_dir / "model.safetensors")
    tensors["embed_tokens.weight"] = target["model.embed_tokens.weight"].clone()
    tensors["lm_head.weight"] = target.get("lm_head.weight", target["model.embed_tokens.weight"]).clone()
    save_file(tensors, folder / "model.safetensors")
    assert detect_layout(read_config(folder), stored_tensor_names(folder)) == DEEPSPEC
    assert detect_layout(read_config(zlab), stored_tensor_names(zlab)) == Z_LAB
    ours = run_pair(tiny_target_dir, folder, [bundled_set("math")], _settings())
    theirs = run_pair(tiny_target_dir, zlab, [bundled_set("math")], _settings())
    assert ours.lossless is True
    # The stored copies are the target's own tables: every draft, hence every acceptance, is the same.
    assert ours.overall.acceptance.tau == theirs.overall.acceptance.tau


def test_unknown_backbone_names_and_anchor_sampling_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "drafter"
    shutil.copytree(FIXTURES / "speculators-dflash", folder)
    raw = read_config(folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["layers.0.attn.wq.weight"] = tensors.pop("layers.0.self_attn.q_proj.weight")
    save_file(tensors, folder / "model.safetensors")
    config = parse_dflash_config(zlab_config(raw))
    with pytest.raises(DFlashFormatError, match=r"missing tensor layers\.0\.self_attn\.q_proj\.weight.*layers\.0\.attn\.wq"):
        load_backbone(folder, read_drafter_weights(folder), config, 2, SPECULATORS, device=torch.device("cpu"),
                      dtype=torch.float32)
    with pytest.raises(DFlashFormatError, match="sample_from_anchor"):
        zlab_config({**raw, "sample_from_anchor": True})
    (folder / "config.json").write_text(json.dumps({**raw, "speculators_model_type": "peagle"}))
    with pytest.raises(DFlashFormatError, match="peagle"):
        detect_layout(read_config(folder), [])
