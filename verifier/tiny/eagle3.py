"""A tiny EAGLE-3 head for the tiny target, in yuhuili's layout or the speculators layout (config.json +
model.safetensors).

`trained=True` trains it the way EAGLE-3 heads are trained: the target greedily continues corpus windows; each row
pairs the target's fused low/mid/high states at position i with the token at i + 1 and learns the target's
next-token distribution at i + 1 (restricted to the draft vocabulary); "training-time test" then feeds the head's
own output states back for two more steps (each row sees the target-feature rows up to itself plus its own earlier
steps), so chained drafts see at training what they see at inference. The draft vocabulary is the corpus's most
frequent target tokens (EAGLE-3's recipe), mapped by `d2t`/`t2d`. CPU, deterministic, well under a minute.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from registry.local import read_config
from verifier.loading import load_causal_lm
from verifier.methods.eagle3.config import (
    EAGLE3_ARCHITECTURE,
    SPECULATORS_ARCHITECTURE,
    SPECULATORS_LAYOUT,
    YUHUILI_LAYOUT,
    parse_eagle3_config,
)
from verifier.methods.eagle3.model import DraftCache, Eagle3DraftModel
from verifier.build_cache import cached_build
from verifier.tiny.dflash import REPLY_OPENING, _greedy_sequences
from verifier.tiny.qwen3 import Training, _fit, corpus_token_stream

SOURCE_FILES = (
    Path(__file__),
    Path(__file__).with_name("qwen3.py"),
    Path(__file__).with_name("dflash.py"),
    Path(__file__).with_name("tokenizer.py"),
    Path(__file__).with_name("corpus.txt"),
    *(Path(__file__).parent.parent / "methods" / "eagle3" / f"{name}.py" for name in ("config", "model", "proposer")),
)


@dataclass(frozen=True)
class HeadShape:
    # Target layers whose outputs are fused (low, mid, high); EAGLE-3's default spacing collapses on 4 layers.
    target_layer_ids: tuple[int, ...] = (0, 1, 2)
    intermediate_size: int = 256
    draft_vocab_size: int = 512
    speculative_tokens: int = 5


@dataclass(frozen=True)
class HeadTraining:
    sequences: int = 128
    prefix_length: int = 16
    continuation_length: int = 80
    ttt_steps: int = 3
    init_std: float = 0.02
    schedule: Training = field(
        default_factory=lambda: Training(steps=300, batch_size=16, sequence_length=96, learning_rate=3e-3, seed=3)
    )


def build_settings(shape: HeadShape, training: HeadTraining, trained: bool, layout: str) -> dict[str, object]:
    return {
        "shape": asdict(shape),
        "training": asdict(training),
        "trained": trained,
        "layout": layout,
        "torch": torch.__version__.split("+")[0],
    }


def _layer_geometry(target_config: dict[str, Any], shape: HeadShape) -> dict[str, Any]:
    rope_parameters = target_config.get("rope_parameters") or {}
    return {
        "hidden_size": target_config["hidden_size"],
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": 1,
        "num_attention_heads": target_config["num_attention_heads"],
        "num_key_value_heads": target_config["num_key_value_heads"],
        "head_dim": target_config["head_dim"],
        "hidden_act": "silu",
        "attention_bias": False,
        "rms_norm_eps": target_config.get("rms_norm_eps", 1e-6),
        "rope_theta": target_config.get("rope_theta", rope_parameters.get("rope_theta", 10000.0)),
        "max_position_embeddings": target_config.get("max_position_embeddings", 1024),
        "vocab_size": target_config["vocab_size"],
        "bos_token_id": target_config.get("bos_token_id"),
        "eos_token_id": target_config.get("eos_token_id"),
    }


def head_config(target_config: dict[str, Any], shape: HeadShape, layout: str) -> dict[str, Any]:
    """config.json in yuhuili's EAGLE-3 format or the speculators format (no `auto_map`, no code)."""
    geometry = _layer_geometry(target_config, shape)
    if layout == YUHUILI_LAYOUT:
        return {
            "architectures": [EAGLE3_ARCHITECTURE],
            "model_type": "llama",
            **geometry,
            "draft_vocab_size": shape.draft_vocab_size,
            "tie_word_embeddings": False,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(shape.target_layer_ids)},
            "torch_dtype": "float32",
        }
    return {
        "architectures": [SPECULATORS_ARCHITECTURE],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.9.0",
        "draft_vocab_size": shape.draft_vocab_size,
        "norm_before_residual": False,
        "norm_before_fc": False,
        "fc_norm": False,
        "norm_output": False,
        # speculators counts hidden states (0 = embeddings): the output of layer i is entry i + 1.
        "eagle_aux_hidden_state_layer_ids": [i + 1 for i in shape.target_layer_ids],
        "transformer_layer_config": {"model_type": "llama", **geometry},
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": shape.speculative_tokens, "accept_tolerance": 0.0}
            ],
            "verifier": {"name_or_path": None, "architectures": target_config.get("architectures") or []},
        },
        "torch_dtype": "float32",
    }


def draft_vocabulary(stream: torch.Tensor, size: int) -> torch.Tensor:
    """The `size` most frequent token ids of the corpus (ties by id), ascending: draft id j speaks target id [j]."""
    counts = Counter(stream.tolist())
    ranked = sorted(counts, key=lambda token: (-counts[token], token))[:size]
    if len(ranked) < size:  # a corpus smaller than the draft vocab: fill with the lowest unused ids
        unused = (t for t in range(size * 2 + max(ranked)) if t not in counts)
        ranked += [next(unused) for _ in range(size - len(ranked))]
    return torch.tensor(sorted(ranked), dtype=torch.long)


def _ttt_mask(rows: int, step: int) -> torch.Tensor:
    """[rows, (step + 1) * rows] bool: target-feature rows up to itself, then its own earlier steps."""
    causal = torch.ones(rows, rows, dtype=torch.bool).tril()
    diagonal = torch.eye(rows, dtype=torch.bool)
    return torch.cat([causal, *([diagonal] * step)], dim=1)


def _train(head: Eagle3DraftModel, target: Any, tokenizer: Any, vocab: torch.Tensor, shape: HeadShape, training: HeadTraining) -> float:
    with torch.no_grad():
        reply_opening = tokenizer.encode(REPLY_OPENING, add_special_tokens=False)
        sequences = _greedy_sequences(target, corpus_token_stream(tokenizer), reply_opening, training)  # type: ignore[arg-type]
        out = target(input_ids=sequences, output_hidden_states=True)
        fused = torch.cat([out.hidden_states[i + 1] for i in shape.target_layer_ids], dim=-1)
        # The target's next-token distribution over the draft vocabulary (renormalised), per position.
        soft_labels = torch.softmax(out.logits[:, :, vocab], dim=-1)
    embedding = target.get_input_embeddings().weight.detach()
    schedule = training.schedule
    length = sequences.shape[1]
    rows = length - 1
    generator = torch.Generator().manual_seed(schedule.seed + 1)
    batches = [torch.randint(0, sequences.shape[0], (schedule.batch_size,), generator=generator) for _ in range(schedule.steps)]

    def ttt_loss(batch: torch.Tensor) -> torch.Tensor:
        tokens = sequences[batch]
        hidden = head.project_features(fused[batch, :rows])
        cache = DraftCache(layers=[])
        total = torch.zeros(())
        for step in range(training.ttt_steps):
            # Row i at step s carries the token at i + 1 + s and predicts the one after it.
            valid = rows - step
            step_tokens = F.pad(tokens[:, 1 + step :], (0, step))
            normed, hidden = head(
                hidden, F.embedding(step_tokens, embedding), torch.arange(rows) + step, cache, _ttt_mask(rows, step)
            )
            log_q = torch.log_softmax(head.lm_head(normed[:, :valid]), dim=-1)
            total = total - (soft_labels[batch, 1 + step :] * log_q).sum(-1).mean()
        return total / training.ttt_steps

    return _fit(head, batches, schedule, ttt_loss)


def _initialise(head: Eagle3DraftModel, std: float) -> None:
    for name, parameter in head.named_parameters():
        if name.endswith("norm.weight") or ".fc_norm." in name:
            torch.nn.init.ones_(parameter)
        elif name.endswith(".bias"):
            torch.nn.init.zeros_(parameter)
        else:
            torch.nn.init.normal_(parameter, mean=0.0, std=std)


def stored_tensors(head: Eagle3DraftModel, vocab: torch.Tensor, target_vocab: int, layout: str) -> dict[str, torch.Tensor]:
    """The head's tensors under the layout's names, with `d2t` (offsets) and `t2d` (mask)."""
    tensors = {name: tensor.detach().contiguous() for name, tensor in head.state_dict().items()}
    tensors["d2t"] = (vocab - torch.arange(vocab.numel())).contiguous()
    t2d = torch.zeros(target_vocab, dtype=torch.bool)
    t2d[vocab] = True
    tensors["t2d"] = t2d
    if layout == YUHUILI_LAYOUT:
        tensors = {("midlayer." + n[len("layers.0.") :] if n.startswith("layers.0.") else n): t for n, t in tensors.items()}
    return tensors


def build_eagle3_head(
    target_dir: Path,
    out_dir: Path,
    trained: bool = True,
    layout: str = YUHUILI_LAYOUT,
    shape: HeadShape = HeadShape(),
    training: HeadTraining = HeadTraining(),
) -> Path:
    """Write an EAGLE-3 head for the target in `target_dir` into `out_dir` (config.json, model.safetensors)."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    if layout not in (YUHUILI_LAYOUT, SPECULATORS_LAYOUT):
        raise ValueError(f"unknown EAGLE-3 layout {layout!r}")
    target_dir, out_dir = Path(target_dir), Path(out_dir)
    target_config = read_config(target_dir)
    tokenizer = AutoTokenizer.from_pretrained(target_dir, local_files_only=True)
    config = head_config(target_config, shape, layout)
    vocab = draft_vocabulary(corpus_token_stream(tokenizer), shape.draft_vocab_size)
    torch.manual_seed(training.schedule.seed)
    head = Eagle3DraftModel(
        parse_eagle3_config(config), len(shape.target_layer_ids), own_embedding=False, own_lm_head=True, fc_bias=False
    )
    _initialise(head, training.init_std)
    head.d2t.copy_(vocab - torch.arange(vocab.numel()))
    if trained:
        target = load_causal_lm(target_dir, device=torch.device("cpu"), dtype=torch.float32)
        for parameter in target.parameters():
            parameter.requires_grad_(False)
        _train(head, target, tokenizer, vocab, shape, training)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    tensors = stored_tensors(head, vocab, target_config["vocab_size"], layout)
    save_file(tensors, out_dir / "model.safetensors", metadata={"format": "pt"})
    return out_dir


def cached_eagle3_head(cache_root: Path, target_dir: Path, *, trained: bool = True, layout: str = YUHUILI_LAYOUT) -> Path:
    """The tiny EAGLE-3 head for `target_dir` (a `cached_target` folder) under `cache_root`."""
    settings = {**build_settings(HeadShape(), HeadTraining(), trained, layout), "target": Path(target_dir).name}
    return cached_build(
        cache_root,
        f"tiny-eagle3-{layout}-{'trained' if trained else 'random'}",
        lambda out_dir: build_eagle3_head(target_dir, out_dir, trained=trained, layout=layout),
        source_files=SOURCE_FILES,
        settings=settings,
    )
