"""Drafters of the DFlash family built on a tiny DFlash v1 drafter's backbone, for tests that need a DFlash 2 or a
DSpark drafter without training one: the extra tensors by the names and shapes the published formats use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

KERNEL, GROUP, RANK, TOP_K = 3, 16, 8, 4  # DFlash 2: convolution taps, channels per group, selector rank and width
MARKOV_RANK = 8  # DSpark's low-rank Markov head


def write_drafter(folder: Path, config: dict, tensors: dict[str, torch.Tensor]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "model.safetensors")
    return folder


def dflash2_tensors(config: dict, vocab: int, generator: torch.Generator, *, identity: bool) -> dict[str, torch.Tensor]:
    """The DFlash 2 additions, by the names llama.cpp's tensor map reads (gguf-py `tensor_mapping.py`, without the
    `model.` prefix the converter adds) and the shapes `dflash.cpp` creates (ggml dims reversed)."""
    hidden = config["hidden_size"]
    groups = hidden // GROUP
    tensors: dict[str, torch.Tensor] = {}
    for i in range(config["num_hidden_layers"]):
        for conv in ("attention_conv", "mlp_conv"):
            if identity:  # tap 0 weighs 1 on both sides, nothing else: the block passes through unchanged
                base = torch.zeros(2, KERNEL, hidden)
                base[:, 0] = 1.0
                projection = torch.zeros(2 * KERNEL * groups, hidden)
            else:
                base = torch.randn(2, KERNEL, hidden, generator=generator) * 0.5
                projection = torch.randn(2 * KERNEL * groups, hidden, generator=generator) * 0.1
            tensors[f"layers.{i}.{conv}.base_kernel"] = base
            tensors[f"layers.{i}.{conv}.kernel_projection.weight"] = projection
    scale = 0.0 if identity else 1.0
    tensors["candidate_selector.predecessor_codebook"] = torch.randn(vocab, RANK, generator=generator) * scale
    tensors["candidate_selector.successor_codebook"] = torch.randn(vocab, RANK, generator=generator) * scale
    tensors["candidate_selector.hidden_projection.weight"] = torch.randn(RANK, hidden, generator=generator)
    return tensors


def dflash2_config(v1_config: dict) -> dict:
    return v1_config | {
        "architectures": ["DFlash2DraftModel"],
        "dflash_config": v1_config["dflash_config"]
        | {"conv_kernel_size": KERNEL, "conv_group_size": GROUP, "selector_rank": RANK, "selector_top_k": TOP_K},
    }


def dflash2_from_dflash(v1_dir: Path, out: Path, vocab: int, *, identity: bool, prefix: str = "", seed: int = 0) -> Path:
    """A DFlash 2 drafter on the backbone of a DFlash v1 drafter (random backbones stay random)."""
    v1_config = json.loads((v1_dir / "config.json").read_text())
    generator = torch.Generator().manual_seed(seed)
    tensors = load_file(v1_dir / "model.safetensors") | dflash2_tensors(v1_config, vocab, generator, identity=identity)
    return write_drafter(out, dflash2_config(v1_config), {prefix + name: t for name, t in tensors.items()})


def dspark_from_dflash(v1_dir: Path, out: Path, target_dir: Path, seed: int = 0) -> Path:
    """DeepSpec's DSpark layout on a DFlash v1 drafter: z-lab's config marked `projector_type: "dspark"`, z-lab's
    backbone names, a gated Markov head (small random weights), the drafter's own embed_tokens / full-vocabulary
    lm_head (copied from the target) and a confidence head."""
    shutil.copytree(v1_dir, out)
    config = json.loads((out / "config.json").read_text())
    config["dflash_config"] |= {"projector_type": "dspark", "markov_rank": MARKOV_RANK, "markov_head_type": "gated",
                                "use_confidence_head": True}
    (out / "config.json").write_text(json.dumps(config))
    tensors = load_file(out / "model.safetensors")
    target = load_file(target_dir / "model.safetensors")
    g = torch.Generator().manual_seed(seed)
    hidden, vocab = config["hidden_size"], config["vocab_size"]
    tensors |= {
        "embed_tokens.weight": target["model.embed_tokens.weight"].clone(),
        "lm_head.weight": target.get("lm_head.weight", target["model.embed_tokens.weight"]).clone(),
        "markov_head.markov_w1.weight": 0.1 * torch.randn(vocab, MARKOV_RANK, generator=g),
        "markov_head.markov_w2.weight": 0.1 * torch.randn(vocab, MARKOV_RANK, generator=g),
        "markov_head.gate_proj.weight": 0.1 * torch.randn(MARKOV_RANK, hidden + MARKOV_RANK, generator=g),
        "markov_head.gate_proj.bias": torch.zeros(MARKOV_RANK),
        "confidence_head.proj.weight": torch.zeros(1, hidden),
        "confidence_head.proj.bias": torch.zeros(1),
    }
    save_file(tensors, out / "model.safetensors")
    return out
