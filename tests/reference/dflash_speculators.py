"""Make the speculators-layout DFlash reference fixtures tests/data/dflash/speculators-dflash*/ (+ their
.reference.safetensors) with the `speculators` package itself. Same separate environment as
tests/reference/eagle3_speculators.py (see its docstring), then:

    /tmp/specvenv/bin/python tests/reference/dflash_speculators.py tests/data/dflash

The package builds a `DFlashDraftModel` (2 Qwen3 layers, a reduced draft vocabulary with d2t/t2d) with random
weights and saves it with its own `save_pretrained`; the target's embedding (which the package leaves out of the
checkpoint) goes to the reference file. Its training forward (`_backbone_forward`) then drafts ONE block, anchored at
a fixed position (the loss mask allows only that anchor), over random fused target states: the block's logits at
every slot (anchor included) are the reference.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# The package looks verifiers up on the Hub; the fixtures need nothing from there.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from safetensors.torch import save_file
from speculators.config import SpeculatorsConfig, VerifierConfig
from speculators.models.dflash import DFlashDraftModel, DFlashSpeculatorConfig
from speculators.models.dspark import DSparkDraftModel, DSparkSpeculatorConfig
from speculators.proposals.greedy import GreedyTokenProposalConfig
from transformers import Qwen3Config

SEQUENCE, BLOCK, ANCHOR, MASK_TOKEN_ID = 14, 4, 9, 5
AUX_IDS = [1, 3]  # hidden-state indices (z-lab layer ids 0 and 2)
VOCAB, DRAFT_VOCAB, HIDDEN = 96, 64, 32


# name: (layer geometry, draft vocabulary, mask token id, DSpark heads or None for DFlash). The "-tiny-target"
# variants have the tiny test target's geometry (verifier/tiny/qwen3.py: hidden 96, 4/2 heads of 24, vocab 1000,
# `<|MASK|>` = 4) so the package's own drafters run end to end through the engine.
SMALL, TINY_TARGET = dict(vocab_size=VOCAB, hidden_size=HIDDEN, head_dim=8), dict(vocab_size=1000, hidden_size=96, head_dim=24)
VARIANTS = {
    "speculators-dflash": (SMALL, DRAFT_VOCAB, MASK_TOKEN_ID, None),
    "speculators-dflash-tiny-target": (TINY_TARGET, 256, 4, None),
    # DSpark: the DFlash backbone drafting from the anchor slot too, plus a Markov logit bias (and a confidence head,
    # which does not change the drafts).
    "speculators-dspark": (
        SMALL, DRAFT_VOCAB, MASK_TOKEN_ID,
        dict(markov_rank=8, markov_head_type="vanilla", enable_confidence_head=True),
    ),
    "speculators-dspark-rnn": (
        SMALL, VOCAB, MASK_TOKEN_ID, dict(markov_rank=8, markov_head_type="rnn", enable_confidence_head=False)
    ),
    "speculators-dspark-tiny-target": (
        TINY_TARGET, 256, 4, dict(markov_rank=16, markov_head_type="gated", enable_confidence_head=True)
    ),
}  # fmt: skip


def main(out_root: Path, name: str) -> None:
    geometry, draft_vocab, mask_token_id, dspark = VARIANTS[name]
    vocab, hidden = geometry["vocab_size"], geometry["hidden_size"]
    layer = Qwen3Config(
        intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **geometry,
    )  # fmt: skip
    layer._attn_implementation = "eager"
    config_class = DFlashSpeculatorConfig if dspark is None else DSparkSpeculatorConfig
    algorithm = "dflash" if dspark is None else "dspark"
    config = config_class(
        transformer_layer_config=layer,
        draft_vocab_size=draft_vocab,
        block_size=BLOCK,
        aux_hidden_state_layer_ids=AUX_IDS,
        mask_token_id=mask_token_id,
        **(dspark or {}),
        speculators_config=SpeculatorsConfig(
            algorithm=algorithm,
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=BLOCK - 1 if dspark is None else BLOCK)],
            default_proposal_method="greedy",
            verifier=VerifierConfig(name_or_path="tiny/dflash-verifier", architectures=["Qwen3ForCausalLM"]),
        ),
    )
    g = torch.Generator().manual_seed(13)
    model = DFlashDraftModel(config) if dspark is None else DSparkDraftModel(config)
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=g)
            parameter.copy_(1.0 + 0.1 * noise if parameter_name.endswith("norm.weight") else 0.2 * noise)
    if draft_vocab != vocab:
        kept = torch.sort(torch.randperm(vocab, generator=g)[:draft_vocab]).values
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[kept] = True
        model.load_vocab_mappings(t2d, kept - torch.arange(draft_vocab))
    model.eval()

    out = out_root / name
    model.save_pretrained(out, safe_serialization=True)
    config_json = json.loads((out / "config.json").read_text())
    config_json["transformer_layer_config"].pop("_attn_implementation", None)
    # save_pretrained also copies the package's own config module (what `auto_map` points at); the fixture keeps
    # `auto_map` in config.json but not that third-party code, which nothing here ever runs.
    (out / "config.py").unlink(missing_ok=True)
    (out / "config.json").write_text(json.dumps(config_json, indent=2) + "\n")

    hidden_states = torch.randn(1, SEQUENCE, len(AUX_IDS) * hidden, generator=g)
    input_ids = torch.randint(0, vocab, (1, SEQUENCE), generator=g)
    loss_mask = torch.zeros(1, SEQUENCE, dtype=torch.long)
    loss_mask[0, ANCHOR] = 1
    with torch.no_grad():
        hidden, logits, _, _, indices = model._backbone_forward(
            hidden_states,
            input_ids,
            loss_mask,
            torch.randn(1, SEQUENCE, hidden, generator=g),
            torch.zeros(1, SEQUENCE, dtype=torch.long),
            max_anchors=1,
        )
        assert indices.tolist() == list(range(ANCHOR, ANCHOR + BLOCK))
        if dspark is not None:
            # As the package's DSparkDraftModel.forward does with sample_from_anchor: slot k's previous token is the
            # block's token k (the anchor, then the teacher-forced drafts), biased by its own Markov head.
            prev = input_ids[0, indices].view(1, BLOCK)
            bias = model.markov_head.block_bias(prev_token_ids=prev, hidden_states=hidden.view(1, BLOCK, -1))
            logits = logits + bias.view(1, BLOCK, -1)
    save_file(
        {
            "target_embedding": model.embed_tokens.weight.detach().contiguous(),
            # Without a reduced vocabulary the package leaves the LM head out too: it is the target's.
            **({"target_lm_head": model.lm_head.weight.detach().contiguous()} if draft_vocab == vocab else {}),
            "hidden_states": hidden_states.contiguous(),
            "input_ids": input_ids.contiguous(),
            "anchor": torch.tensor([ANCHOR]),
            "logits": logits[0].contiguous(),  # [BLOCK, DRAFT_VOCAB], slot 0 = the anchor
        },
        out_root / f"{name}.reference.safetensors",
    )
    print(f"{out}: {sorted(p.name for p in out.iterdir())}")


if __name__ == "__main__":
    for variant in VARIANTS:
        main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/dflash"), variant)
