"""DFlash 2 drafters (`DFlash2DraftModel`): the dynamic convolution and the selector's walk against their llama.cpp
definitions (`src/models/dflash.cpp`, `common/speculative.cpp`) written out independently here, losslessness
through the engine on the tiny target, and refusals by name."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.drafter_variants import (KERNEL, RANK, TOP_K, dflash2_config, dflash2_from_dflash, dflash2_tensors,
                                     write_drafter)
from verifier.engines.pytorch import IncompatiblePair, RunSettings, run_pair
from verifier.loading import LoadedTarget
from verifier.methods import build_proposer as build
from verifier.methods.dflash.config import DFlashFormatError
from verifier.methods.dflash2.model import CandidateSelector, GroupedDynamicCausalConv
from verifier.prompts import bundled_set
from verifier.proposer import TargetOutput


def _settings(**overrides: Any) -> RunSettings:
    return replace(RunSettings(max_new_tokens=24, repeats=1, warmup=0, device="cpu"), **overrides)


def random_backbone(v1_dir: Path, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        name: torch.ones_like(t) if name.endswith("norm.weight") else torch.randn(t.shape, generator=generator) * 0.2
        for name, t in load_file(v1_dir / "model.safetensors").items()
    }


@pytest.fixture(scope="module")
def vocab(tiny_target: LoadedTarget) -> int:
    return int(tiny_target.config["vocab_size"])


@pytest.fixture(scope="module")
def random_dflash2_dir(tmp_path_factory: pytest.TempPathFactory, tiny_dflash_dir: Path, vocab: int) -> Path:
    """Every weight random; stored with the `model.` prefix as some exports do."""
    v1_config = json.loads((tiny_dflash_dir / "config.json").read_text())
    generator = torch.Generator().manual_seed(11)
    tensors = random_backbone(tiny_dflash_dir, 5) | dflash2_tensors(v1_config, vocab, generator, identity=False)
    folder = tmp_path_factory.mktemp("dflash2") / "random"
    return write_drafter(folder, dflash2_config(v1_config), {"model." + name: t for name, t in tensors.items()})


def _prefill(target: LoadedTarget, text: str) -> TargetOutput:
    from verifier.decode import new_cache

    ids = torch.tensor(target.tokenizer(text)["input_ids"])
    cache = new_cache(target.model)
    with torch.no_grad():
        out = target.model(input_ids=ids[None], cache=cache, use_cache=True, output_hidden_states=True)
    return TargetOutput(0, ids, int(out.logits[0, -1].argmax()), cache, tuple(out.hidden_states))


# ---------------------------------------------------------------------------------------------------------------
# The two DFlash 2 parts against llama.cpp's definitions
# ---------------------------------------------------------------------------------------------------------------


def test_dynamic_convolution_follows_llama_cpp() -> None:
    """build_dflash2_conv: the projection's outputs are [side][tap][group] (ggml ne0 = group fastest); channel c of
    tap t weighs base[side, t, c] + coefficient[side, t, c // group_size] at the OUTPUT position p and multiplies
    the value at p - t (zero before the block)."""
    torch.manual_seed(0)
    hidden, length, groups = 32, 5, 32 // 8
    conv = GroupedDynamicCausalConv(hidden, KERNEL, 8)
    torch.nn.init.normal_(conv.base_kernel)
    x, values = torch.randn(1, length, hidden), torch.randn(1, length, hidden)
    taps = conv.taps(x)
    flat = conv.kernel_projection(x)[0]
    for side in (0, 1):
        expected = torch.zeros(length, hidden)
        for p in range(length):
            for t in range(KERNEL):
                if p - t < 0:
                    continue
                for c in range(hidden):
                    weight = conv.base_kernel[side, t, c] + flat[p, side * KERNEL * groups + t * groups + c // 8]
                    expected[p, c] += weight * values[0, p - t, c]
        torch.testing.assert_close(conv.mix(values, taps, side)[0], expected)


def test_selector_walk_follows_the_llama_cpp_lattice() -> None:
    """build_dflash2_selector packs, per position, the top-k candidates then k x k scores
    (predecessor-major); common/speculative.cpp walks it greedily from predecessor 0 (position 1 scores against the
    anchor, so its rows are all alike). Our walk must pick the same tokens."""
    torch.manual_seed(1)
    vocab, hidden, positions = 50, 24, 6
    selector = CandidateSelector(vocab, hidden, RANK, TOP_K)
    for parameter in selector.parameters():
        torch.nn.init.normal_(parameter)
    logits, states, anchor = torch.randn(positions, vocab) * 3, torch.randn(positions, hidden), torch.tensor(7)
    unary, candidates = logits.topk(TOP_K, dim=-1)
    gates = states @ selector.hidden_projection.weight.T
    rows = []
    for p in range(positions):
        predecessors = anchor[None] if p == 0 else candidates[p - 1]
        condition = selector.predecessor_codebook[predecessors] * gates[p]  # [n_pred, rank]
        scores = condition @ selector.successor_codebook[candidates[p]].T + unary[p]  # [n_pred, k]
        rows.append(torch.cat([candidates[p].float(), scores.expand(TOP_K, TOP_K).reshape(-1)]))
    walked, predecessor = [], 0
    for row in rows:
        scores = row[TOP_K + predecessor * TOP_K : TOP_K + (predecessor + 1) * TOP_K]
        predecessor = int(scores.argmax())
        walked.append(int(row[predecessor]))
    with torch.no_grad():
        assert selector.walk(logits, states, anchor).tolist() == walked
    assert walked != candidates[:, 0].tolist()  # the transition scores changed the path, not just the logits


# ---------------------------------------------------------------------------------------------------------------
# Through the engine
# ---------------------------------------------------------------------------------------------------------------


def test_random_dflash2_drafter_is_lossless(random_dflash2_dir: Path, tiny_target_dir: Path) -> None:
    run = run_pair(tiny_target_dir, random_dflash2_dir, [bundled_set("math"), bundled_set("chat")], _settings())
    assert run.method == "dflash2"
    assert run.lossless is True
    assert run.first_divergence is None


def test_identity_convolutions_and_flat_codebooks_draft_like_dflash_v1(
    tmp_path: Path, tiny_dflash_dir: Path, tiny_target: LoadedTarget, tiny_target_dir: Path, vocab: int
) -> None:
    """With tap 0 = 1 and no projection the convolutions pass the block through, and with zero codebooks the walk
    is the argmax: DFlash 2 must then draft exactly what the trained v1 drafter drafts, round after round."""
    folder = dflash2_from_dflash(tiny_dflash_dir, tmp_path / "identity", vocab, identity=True)
    ours = build("dflash2", folder, tiny_target, _settings())
    v1 = build("dflash", tiny_dflash_dir, tiny_target, _settings())
    first = _prefill(tiny_target, "What is 12 plus 30?")
    ours.begin(first.input_ids, first)
    v1.begin(first.input_ids, first)
    drafts = ours.propose(0.0, torch.Generator())
    assert drafts.k == ours.draft_length > 0
    assert drafts.tokens.tolist() == v1.propose(0.0, torch.Generator()).tokens.tolist()
    run = run_pair(tiny_target_dir, folder, [bundled_set("math")], _settings())
    assert run.lossless is True
    assert run.overall.acceptance is not None and run.overall.acceptance.tau > 1.5


def test_sampling_uses_the_walk_as_a_point_mass(random_dflash2_dir: Path, tiny_target: LoadedTarget) -> None:
    proposer = build("dflash2", random_dflash2_dir, tiny_target, _settings())
    first = _prefill(tiny_target, "Tell me about rivers.")
    proposer.begin(first.input_ids, first)
    sampled = proposer.propose(0.9, torch.Generator().manual_seed(3))
    assert sampled.q_probs is None and sampled.k == proposer.draft_length


# ---------------------------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------------------------


def _edited(source: Path, out: Path, edit_tensors=None, edit_config=None) -> Path:  # type: ignore[no-untyped-def]
    shutil.copytree(source, out)
    if edit_tensors is not None:
        tensors = edit_tensors(load_file(out / "model.safetensors"))
        save_file({k: v.contiguous() for k, v in tensors.items()}, out / "model.safetensors")
    if edit_config is not None:
        (out / "config.json").write_text(json.dumps(edit_config(json.loads((out / "config.json").read_text()))))
    return out


def test_unknown_and_missing_tensors_are_refused_by_name(
    tmp_path: Path, random_dflash2_dir: Path, tiny_target: LoadedTarget
) -> None:
    def rename(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        tensors["model.layers.0.attention_conv.kernel_proj.weight"] = tensors.pop(
            "model.layers.0.attention_conv.kernel_projection.weight"
        )
        del tensors["model.candidate_selector.hidden_projection.weight"]
        return tensors

    broken = _edited(random_dflash2_dir, tmp_path / "renamed", edit_tensors=rename)
    with pytest.raises(DFlashFormatError) as refused:
        build("dflash2", broken, tiny_target, _settings())
    message = str(refused.value)
    assert "unexpected tensor layers.0.attention_conv.kernel_proj.weight" in message
    assert "missing tensor layers.0.attention_conv.kernel_projection.weight" in message
    assert "missing tensor candidate_selector.hidden_projection.weight" in message


def test_misshapen_convolution_is_refused(tmp_path: Path, random_dflash2_dir: Path, tiny_target: LoadedTarget) -> None:
    def transpose(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        name = "model.layers.1.mlp_conv.base_kernel"
        tensors[name] = tensors[name].permute(2, 1, 0)  # ggml's dim order, not torch's
        return tensors

    broken = _edited(random_dflash2_dir, tmp_path / "transposed", edit_tensors=transpose)
    with pytest.raises(DFlashFormatError, match=r"tensor layers\.1\.mlp_conv\.base_kernel has shape"):
        build("dflash2", broken, tiny_target, _settings())


def test_missing_selector_settings_are_refused(
    tmp_path: Path, random_dflash2_dir: Path, tiny_target: LoadedTarget
) -> None:
    def drop(config: dict) -> dict:
        del config["dflash_config"]["conv_group_size"]
        return config

    broken = _edited(random_dflash2_dir, tmp_path / "no-group", edit_config=drop)
    with pytest.raises(DFlashFormatError, match="dflash_config.conv_group_size"):
        build("dflash2", broken, tiny_target, _settings())


def test_codebooks_for_another_vocabulary_are_incompatible(
    tmp_path: Path, random_dflash2_dir: Path, tiny_target: LoadedTarget, vocab: int
) -> None:
    def shrink(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        for side in ("predecessor", "successor"):
            name = f"model.candidate_selector.{side}_codebook"
            tensors[name] = tensors[name][: vocab - 8]
        return tensors

    broken = _edited(random_dflash2_dir, tmp_path / "other-vocab", edit_tensors=shrink)
    with pytest.raises(IncompatiblePair) as refused:
        build("dflash2", broken, tiny_target, _settings())
    assert any(f"cover {vocab - 8} token ids" in reason for reason in refused.value.reasons)
