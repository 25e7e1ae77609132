"""EAGLE-3 heads: yuhuili's layout and the speculators layout against their references (fixtures in
tests/data/eagle3, made by tests/reference/eagle3_*.py), losslessness and acceptance through the engine on the tiny
target, sampled proposals in the target's vocabulary, and refusals."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from registry.domain.run import Run
from verifier.engines.pytorch import IncompatiblePair, RunSettings, run_pair
from registry.local import read_config
from verifier.loading import LoadedTarget
from verifier.methods.eagle3.config import SPECULATORS_LAYOUT, YUHUILI_LAYOUT, Eagle3FormatError, parse_eagle3_config
from verifier.methods.eagle3.model import DraftCache
from verifier.methods.eagle3.proposer import Eagle3Proposer, build_proposer, load_eagle3
from verifier.prompts import bundled_set, bundled_sets
from verifier.proposer import TargetOutput
from verifier.tiny.eagle3 import cached_eagle3_head

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "eagle3"
MAX_NEW_TOKENS = 32


def _settings(**overrides: Any) -> RunSettings:
    return replace(RunSettings(max_new_tokens=MAX_NEW_TOKENS, repeats=1, warmup=0, device="cpu"), **overrides)


@pytest.fixture(scope="module")
def trained_run(tiny_target_dir: Path, trained_head_dir: Path) -> Run:
    return run_pair(tiny_target_dir, trained_head_dir, bundled_sets(), _settings())


def _load(folder: Path, num_fused: int = 3):
    config = parse_eagle3_config(read_config(folder))
    return config, load_eagle3(folder, config, num_fused, device=torch.device("cpu"), dtype=torch.float32)


# ---------------------------------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["speculators-llama", "speculators-qwen3", "speculators-tiny-target"])
def test_speculators_heads_match_the_package_forward(variant: str) -> None:
    """Every row, every training-time-test step: our chain with the same teacher-forced tokens gives the logits that
    speculators' own Eagle3DraftModel gave on the same weights."""
    folder = FIXTURES / variant
    config, model = _load(folder)
    assert config.layout == SPECULATORS_LAYOUT
    reference = load_file(FIXTURES / f"{folder.name}.reference.safetensors")
    fused, ids, expected = reference["hidden_states"], reference["input_ids"][0], reference["logits"]
    steps, rows = expected.shape[0], ids.shape[0]
    padded = torch.cat([ids, torch.zeros(steps, dtype=torch.long)])
    with torch.no_grad():
        for row in range(rows):
            cache = DraftCache(layers=[])
            # speculators' rows are already shifted: the state at i is paired with input_ids[i].
            normed, state = model(
                model.project_features(fused[:, : row + 1]), model.embed_tokens(ids[None, : row + 1]),
                torch.arange(row + 1), cache,
            )  # fmt: skip
            ours = [model.lm_head(normed[0, -1])]
            for step in range(1, steps):
                token = padded[row + step][None, None]
                normed, state = model(state[:, -1:], model.embed_tokens(token), torch.tensor([row + step]), cache)
                ours.append(model.lm_head(normed[0, -1]))
            # float32 through chained steps: within 1e-5 on the set tested before (transformers 5.24), 1.06e-5 at worst
            # (one logit of 768) on the current one; a wrong forward is off by far more.
            torch.testing.assert_close(torch.stack(ours), expected[:, row], atol=3e-5, rtol=1e-5)


def _yuhuili_proposer(draft_length: int) -> tuple[Eagle3Proposer, dict[str, torch.Tensor]]:
    folder = FIXTURES / "yuhuili"
    reference = load_file(FIXTURES / f"{folder.name}.reference.safetensors")
    config, model = _load(folder)
    assert config.layout == YUHUILI_LAYOUT and not hasattr(model, "embed_tokens")
    target_layers = reference["target_hidden_states"].shape[0] - 1
    proposer = Eagle3Proposer(
        model,
        embedding=torch.nn.Embedding.from_pretrained(reference["target_embedding"]),  # the target's table
        lm_head=model.lm_head,
        target_vocab=config.vocab_size,
        hidden_state_indices=config.hidden_state_indices(target_layers),
        draft_length=draft_length,
    )
    return proposer, reference


def test_yuhuili_head_drafts_the_reference_chain() -> None:
    """The proposer's greedy chain equals the EAGLE reference forward (topK_genrate with top_k 1)."""
    expected_steps = load_file(FIXTURES / "yuhuili.reference.safetensors")["logits"].shape[0]
    proposer, reference = _yuhuili_proposer(expected_steps)
    states = tuple(h[None] for h in reference["target_hidden_states"])
    ids = reference["input_ids"]
    view = TargetOutput(0, ids, int(reference["sample"]), None, states)
    proposer.begin(ids, view)
    proposal = proposer.propose(0.0, torch.Generator())
    assert proposal.tokens.tolist() == reference["drafted"].tolist()
    torch.testing.assert_close(torch.stack(proposer.last_logits), reference["logits"], atol=1e-5, rtol=1e-5)


def test_draft_rows_are_dropped_between_rounds() -> None:
    """After a round, feeding the committed rows again yields what a fresh proposer computes from scratch."""
    proposer, reference = _yuhuili_proposer(3)
    states = tuple(h[None] for h in reference["target_hidden_states"])
    ids, sample = reference["input_ids"], int(reference["sample"])
    proposer.begin(ids[:5], TargetOutput(0, ids[:5], int(ids[5]), None, tuple(s[:, :5] for s in states)))
    proposer.propose(0.0, torch.Generator())
    committed = torch.cat([ids[5:], torch.tensor([sample])])
    later = TargetOutput(5, ids[5:], sample, None, tuple(s[:, 5:] for s in states))
    proposer.observe(3, committed, later)
    incremental = proposer.propose(0.0, torch.Generator())
    fresh, _ = _yuhuili_proposer(3)
    fresh.begin(ids, TargetOutput(0, ids, sample, None, states))
    assert torch.equal(fresh.propose(0.0, torch.Generator()).tokens, incremental.tokens)
    torch.testing.assert_close(torch.stack(fresh.last_logits), torch.stack(proposer.last_logits), atol=1e-5, rtol=1e-5)


def test_the_publishers_config_py_is_never_executed(tmp_path: Path) -> None:
    folder = tmp_path / "head"
    shutil.copytree(FIXTURES / "speculators-llama", folder)
    (folder / "config.py").write_text("raise SystemExit('the drafter folder ran code')\n")
    assert "auto_map" in read_config(folder)
    config, model = _load(folder)
    assert config.draft_vocab_size == 64 and model.fc.weight.shape == (32, 96)


# ---------------------------------------------------------------------------------------------------------------
# Through the engine
# ---------------------------------------------------------------------------------------------------------------


def test_trained_head_is_lossless_on_every_bundled_prompt(trained_run: Run) -> None:
    assert trained_run.method == "eagle3"
    assert trained_run.first_divergence is None
    assert trained_run.lossless is True
    assert all(result.lossless for result in trained_run.per_set)
    assert trained_run.draft_length == 5


def test_trained_head_accepts_clearly_more_than_a_random_one(
    trained_run: Run, tiny_target_dir: Path, random_head_dir: Path
) -> None:
    untrained = run_pair(tiny_target_dir, random_head_dir, [bundled_set("math")], _settings())
    trained_tau = next(r for r in trained_run.per_set if r.name == "math").acceptance.tau
    untrained_tau = untrained.overall.acceptance.tau
    assert untrained.lossless is True
    assert untrained_tau < 1.3
    assert trained_tau > untrained_tau + 0.8


@pytest.mark.parametrize("made_by", ["speculators package", "our builder"])
def test_speculators_layout_heads_run_losslessly(made_by: str, model_cache: Path, tiny_target_dir: Path) -> None:
    if made_by == "speculators package":
        head = FIXTURES / "speculators-tiny-target"
    else:
        head = cached_eagle3_head(model_cache, tiny_target_dir, trained=True, layout=SPECULATORS_LAYOUT)
    run = run_pair(tiny_target_dir, head, [bundled_set("math")], _settings(max_new_tokens=16))
    assert run.method == "eagle3"
    assert run.lossless is True and run.first_divergence is None
    assert run.draft_length == 5 if made_by == "our builder" else run.draft_length == 3


def test_sampled_proposals_live_in_the_target_vocabulary(trained_head_dir: Path, tiny_target: LoadedTarget) -> None:
    from verifier.decode import new_cache

    proposals = []
    for _ in range(2):
        proposer = build_proposer(trained_head_dir, tiny_target, _settings(), read_config(trained_head_dir))
        ids = torch.tensor(tiny_target.tokenizer("Tell me about rivers.")["input_ids"])
        with torch.no_grad():
            out = tiny_target.model(input_ids=ids[None], cache=new_cache(tiny_target.model), output_hidden_states=True)
        proposer.begin(ids, TargetOutput(0, ids, int(out.logits[0, -1].argmax()), None, tuple(out.hidden_states)))
        proposals.append(proposer.propose(0.8, torch.Generator().manual_seed(7)))
    proposal = proposals[0]
    assert proposal.q_probs is not None
    vocab = tiny_target.model.get_output_embeddings().weight.shape[0]
    assert proposal.q_probs.shape == (proposal.k, vocab)
    torch.testing.assert_close(proposal.q_probs.sum(-1), torch.ones(proposal.k))
    assert all(proposal.q_probs[i, t] > 0 for i, t in enumerate(proposal.tokens.tolist()))
    # Only target ids of the reduced draft vocabulary can carry mass.
    assert int((proposal.q_probs.sum(0) > 0).sum()) <= read_config(trained_head_dir)["draft_vocab_size"]
    assert torch.equal(proposals[0].tokens, proposals[1].tokens)


def test_sampled_runs_stay_exact_in_distribution_terms(tiny_target_dir: Path, trained_head_dir: Path) -> None:
    run = run_pair(tiny_target_dir, trained_head_dir, [bundled_set("math")], _settings(temperature=0.8, seed=3))
    assert run.method == "eagle3"
    assert run.overall.acceptance.tau > 1.0


# ---------------------------------------------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------------------------------------------


def test_unknown_tensor_names_are_refused_by_name(tmp_path: Path) -> None:
    folder = tmp_path / "head"
    shutil.copytree(FIXTURES / "yuhuili", folder)
    tensors = load_file(folder / "model.safetensors")
    tensors["midlayer.attn.wq.weight"] = tensors.pop("midlayer.self_attn.q_proj.weight")
    save_file(tensors, folder / "model.safetensors")
    config = parse_eagle3_config(read_config(folder))
    with pytest.raises(Eagle3FormatError) as refused:
        load_eagle3(folder, config, 3, device=torch.device("cpu"), dtype=torch.float32)
    assert "midlayer.attn.wq.weight" in str(refused.value)
    assert "missing tensor midlayer.self_attn.q_proj.weight" in str(refused.value)


def test_hidden_size_mismatch_is_refused(tiny_target_dir: Path) -> None:
    with pytest.raises(IncompatiblePair) as refused:
        run_pair(tiny_target_dir, FIXTURES / "yuhuili", [bundled_set("math")], _settings())
    assert any("hidden_size" in reason for reason in refused.value.reasons)


def test_fused_layers_beyond_the_target_are_refused(tmp_path: Path, tiny_target: LoadedTarget) -> None:
    folder = tmp_path / "head"
    shutil.copytree(FIXTURES / "speculators-tiny-target", folder)
    config = json.loads((folder / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [1, 2, 9]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(IncompatiblePair) as refused:
        build_proposer(folder, tiny_target, _settings(), config)
    assert any(reason.endswith(": [8]") for reason in refused.value.reasons)  # index 9 = output of layer 8


def test_non_eagle3_speculators_configs_are_refused() -> None:
    with pytest.raises(Eagle3FormatError, match="dflash"):
        parse_eagle3_config({"speculators_model_type": "dflash", "transformer_layer_config": {}})


@pytest.mark.parametrize("variant", ["speculators-llama", "yuhuili"])
@pytest.mark.parametrize("target_layers", [2, 3, 5, 6])
def test_registry_and_verifier_agree_on_layer_ids(variant: str, target_layers: int) -> None:
    """`drafters check` (registry.compat) and the verifier refuse exactly the same targets."""
    from registry.domain.compat import check_pair

    from verifier.methods.eagle3.config import TargetShape, compatibility_problems

    drafter = read_config(FIXTURES / variant)
    config = parse_eagle3_config(drafter)
    target = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": config.hidden_size,
        "num_hidden_layers": target_layers, "vocab_size": config.vocab_size,
    }  # fmt: skip
    verdict = check_pair(drafter, target, drafter_method=None, target_repo_id=None, declared_targets=())
    problems = compatibility_problems(config, TargetShape(config.hidden_size, target_layers, config.vocab_size))
    assert (verdict.verdict == "incompatible") == bool(problems), (verdict, problems)
    assert verdict.verdict in ("incompatible", "structural")
