"""Make the speculators EAGLE-3 reference fixtures under tests/data/eagle3/ with the `speculators` package itself.

Run ONCE, in a separate environment (speculators pins its own transformers and pulls a CUDA torch, so it is not a
project dependency), then commit the output:

    python3 -m venv /tmp/specvenv
    /tmp/specvenv/bin/pip install torch==2.13.0
    /tmp/specvenv/bin/pip install --no-deps speculators==0.9.0 hs-connectors==0.9.0
    /tmp/specvenv/bin/pip install "transformers>=5,<=5.19" safetensors pydantic pydantic-settings loguru rich \
        typer huggingface-hub numpy tqdm psutil openai datasets
    /tmp/specvenv/bin/python tests/reference/eagle3_speculators.py tests/data/eagle3

For each variant the package builds an `Eagle3DraftModel` with random weights, saves it with its own
`save_pretrained` (config.json + model.safetensors: the speculators layout as the package writes it), and runs its
own training-time-test forward on random fused target states (`ttt_steps` chained steps, teacher-forced tokens).
The drafted logits of every step (captured at `lm_head`) go to <variant>.reference.safetensors beside the folder, with the inputs.
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
from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig
from speculators.proposals.greedy import GreedyTokenProposalConfig
from transformers import LlamaConfig, Qwen3Config

TTT_STEPS = 3
SEQUENCE = 12
AUX_IDS = [1, 2, 3]

VARIANTS = {
    # 1 Llama layer, reduced draft vocabulary with d2t/t2d, EAGLE-3 defaults.
    "speculators-llama": dict(
        layer=LlamaConfig(
            vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        draft_vocab_size=64, flags={},
    ),
    # 2 Qwen3 layers (q/k norms), full vocabulary, every optional norm speculators knows.
    "speculators-qwen3": dict(
        layer=Qwen3Config(
            vocab_size=80, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        draft_vocab_size=80, flags={"norm_before_residual": True, "fc_norm": True, "norm_output": True},
    ),
    # The tiny test target's geometry (verifier/tiny/qwen3.py: hidden 96, 4 layers, 4/2 heads of 24, vocab 1000),
    # so the package's own head runs end to end through the engine; no reference logits needed beyond the above.
    "speculators-tiny-target": dict(
        layer=LlamaConfig(
            vocab_size=1000, hidden_size=96, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2, head_dim=24, max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        draft_vocab_size=256, flags={}, verifier_architectures=["Qwen3ForCausalLM"],
    ),
}  # fmt: skip


def _randomise(model: torch.nn.Module, generator: torch.Generator) -> None:
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if name.endswith("norm.weight") or "fc_norm" in name:
                parameter.copy_(1.0 + 0.1 * noise)
            else:
                parameter.copy_(0.2 * noise)


def make(name: str, out_root: Path) -> None:
    spec = VARIANTS[name]
    layer = spec["layer"]
    layer._attn_implementation = "eager"  # dense float masks: exact on CPU
    config = Eagle3SpeculatorConfig(
        transformer_layer_config=layer,
        draft_vocab_size=spec["draft_vocab_size"],
        eagle_aux_hidden_state_layer_ids=AUX_IDS,
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3",
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=TTT_STEPS)],
            default_proposal_method="greedy",
            verifier=VerifierConfig(
                name_or_path=f"tiny/{name}-verifier",
                architectures=spec.get("verifier_architectures", ["LlamaForCausalLM"]),
            ),
        ),
        **spec["flags"],
    )
    generator = torch.Generator().manual_seed(11)
    model = Eagle3DraftModel(config)
    _randomise(model, generator)
    vocab, draft_vocab = layer.vocab_size, spec["draft_vocab_size"]
    if draft_vocab != vocab:
        kept = torch.sort(torch.randperm(vocab, generator=generator)[:draft_vocab]).values
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

    hidden_states = torch.randn(1, SEQUENCE, len(AUX_IDS) * layer.hidden_size, generator=generator)
    input_ids = torch.randint(0, vocab, (1, SEQUENCE), generator=generator)
    captured: list[torch.Tensor] = []
    model.lm_head.register_forward_hook(lambda module, args, output: captured.append(output.detach().clone()))
    with torch.no_grad():
        model(
            hidden_states=hidden_states,
            input_ids=input_ids,
            document_ids=torch.zeros(1, SEQUENCE, dtype=torch.long),
            ttt_steps=TTT_STEPS,
        )
    save_file(
        {
            "hidden_states": hidden_states.contiguous(),
            "input_ids": input_ids.contiguous(),
            "logits": torch.cat(captured).contiguous(),  # [ttt_steps, SEQUENCE, draft_vocab]
        },
        out_root / f"{name}.reference.safetensors",
    )
    print(f"{out}: {sorted(p.name for p in out.iterdir())}")


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/eagle3")
    for variant in VARIANTS:
        make(variant, root)
