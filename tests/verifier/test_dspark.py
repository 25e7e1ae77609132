"""DSpark drafters in the speculators layout (fixtures made by the `speculators` package itself with
tests/reference/dflash_speculators.py): the Markov-biased block against the package's forward, losslessness through
the engine on the tiny target, and refusals."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.drafter_variants import dspark_from_dflash
from verifier.engines.pytorch import RunSettings, run_pair
from registry.local import read_config
from verifier.methods.dflash.config import DFlashFormatError, parse_dflash_config
from verifier.methods.dflash.proposer import read_drafter_weights
from verifier.methods.dflash.layouts import load_backbone, zlab_config
from verifier.methods import build_proposer as build
from verifier.methods.dspark import MarkovHead, _head_settings, markov_head_shapes, split_tensors
from verifier.prompts import bundled_set
from verifier.tiny.dflash import cached_dflash_drafter

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "dflash"


def _settings(**overrides: object) -> RunSettings:
    return replace(RunSettings(max_new_tokens=16, repeats=1, warmup=0, device="cpu"), **overrides)


@pytest.mark.parametrize("variant", ["speculators-dspark", "speculators-dspark-rnn", "speculators-dspark-tiny-target"])
def test_markov_biased_block_matches_the_package(variant: str) -> None:
    """Every slot drafts from the anchor on; with the package's teacher-forced previous tokens our slot-by-slot
    Markov bias gives the package's logits (vanilla, rnn and gated heads)."""
    folder = FIXTURES / variant
    raw = read_config(folder)
    config = parse_dflash_config(zlab_config(raw, anchor_drafts=True))
    tensors = read_drafter_weights(folder)
    vocab = raw["transformer_layer_config"]["vocab_size"]
    head_vocab = tensors["lm_head.weight"].shape[0] if "lm_head.weight" in tensors else vocab
    rank, head_type = _head_settings(raw)
    rest, head_tensors = split_tensors(folder, tensors, markov_head_shapes(head_type, vocab, head_vocab, rank, config.hidden_size))
    model = load_backbone(folder, rest, config, 2, "speculators DSpark", device=torch.device("cpu"), dtype=torch.float32)
    head = MarkovHead(vocab, head_vocab, rank, config.hidden_size, head_type)
    head.load_state_dict(head_tensors)
    reference = load_file(FIXTURES / f"{variant}.reference.safetensors")
    anchor, ids = int(reference["anchor"]), reference["input_ids"][0]
    block = torch.full((config.block_size,), config.mask_token_id)
    block[0] = ids[anchor]
    lm_head = rest["lm_head.weight"] if "lm_head.weight" in rest else reference["target_lm_head"]
    with torch.no_grad():
        states = model(
            reference["target_embedding"][block][None],
            torch.arange(anchor, anchor + config.block_size),
            reference["hidden_states"][:, :anchor],
            torch.arange(anchor),
        )[0]
        state, ours = head.initial_state(states[0]), []
        for slot in range(config.block_size):
            bias, state = head.step(ids[anchor + slot], states[slot], state)
            ours.append(states[slot] @ lm_head.T + bias)
    torch.testing.assert_close(torch.stack(ours), reference["logits"], atol=1e-5, rtol=1e-5)


def test_the_package_dspark_drafter_runs_losslessly(tiny_target_dir: Path) -> None:
    head = FIXTURES / "speculators-dspark-tiny-target"
    greedy = run_pair(tiny_target_dir, head, [bundled_set("math")], _settings())
    assert greedy.method == "dspark"
    assert greedy.lossless is True and greedy.first_divergence is None
    assert greedy.draft_length == 4  # the whole block: slot 0 drafts too
    sampled = run_pair(tiny_target_dir, head, [bundled_set("math")], _settings(temperature=0.8, seed=2))
    assert sampled.method == "dspark" and sampled.overall.acceptance.tau >= 1.0


def test_sampled_dspark_proposals_live_in_the_target_vocabulary(tiny_target: object) -> None:
    from verifier.decode import new_cache
    from verifier.proposer import TargetOutput

    proposer = build("dspark", FIXTURES / "speculators-dspark-tiny-target", tiny_target, _settings())
    ids = torch.tensor(tiny_target.tokenizer("Tell me about rivers.")["input_ids"])
    with torch.no_grad():
        out = tiny_target.model(input_ids=ids[None], cache=new_cache(tiny_target.model), output_hidden_states=True)
    proposer.begin(ids, TargetOutput(0, ids, int(out.logits[0, -1].argmax()), None, tuple(out.hidden_states)))
    proposal = proposer.propose(0.9, torch.Generator().manual_seed(1))
    assert proposal.q_probs is not None and proposal.q_probs.shape == (4, 1000)
    torch.testing.assert_close(proposal.q_probs.sum(-1), torch.ones(4))
    assert all(proposal.q_probs[i, t] > 0 for i, t in enumerate(proposal.tokens.tolist()))
    assert int((proposal.q_probs.sum(0) > 0).sum()) <= 256


def test_unknown_markov_tensors_are_refused_by_name(tmp_path: Path, tiny_target: object) -> None:
    folder = tmp_path / "dspark"
    shutil.copytree(FIXTURES / "speculators-dspark-tiny-target", folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["markov_head.prev_table.weight"] = tensors.pop("markov_head.markov_w1.weight")
    save_file(tensors, folder / "model.safetensors")
    with pytest.raises(DFlashFormatError, match=r"missing tensor markov_head\.markov_w1\.weight.*markov_head\.prev_table"):
        build("dspark", folder, tiny_target, _settings())
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "sample_from_anchor": False}))
    with pytest.raises(DFlashFormatError, match="sample_from_anchor"):
        build("dspark", folder, tiny_target, _settings())


def test_deepspec_exports_run_with_their_own_embedding_and_head(tmp_path: Path, tiny_target_dir: Path) -> None:
    """DeepSpec's layout: z-lab's config marked `projector_type: "dspark"`, z-lab's backbone names, the same Markov
    names as speculators, the drafter's own embed_tokens / full-vocabulary lm_head, and a confidence head."""
    zlab = cached_dflash_drafter(tiny_target_dir.parent, tiny_target_dir, trained=False)
    folder = dspark_from_dflash(zlab, tmp_path / "dspark_tiny_block8", tiny_target_dir)
    config = read_config(folder)
    run = run_pair(tiny_target_dir, folder, [bundled_set("math")], _settings())
    assert run.method == "dspark"
    assert run.lossless is True and run.first_divergence is None
    assert run.draft_length == config["block_size"]
