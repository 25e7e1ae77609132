"""A tiny DFlash v1 drafter for a tiny target, in z-lab's published format (config.json + model.safetensors).

`trained=True` trains it the way DFlash drafters are trained (block diffusion): the target greedily continues random
corpus windows; for random anchors in those continuations the drafter sees the target's fused hidden states of the
positions before the anchor and the block `[anchor, mask x (B - 1)]`, and learns the target's own next B - 1 tokens
with exponentially position-decayed weights. Several anchors share one pass (each block sees only the context before
its anchor and itself). CPU, deterministic, well under a minute of compute.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from registry.local import read_config
from verifier.loading import load_causal_lm
from verifier.methods.dflash.config import DFLASH_ARCHITECTURE, parse_dflash_config
from verifier.methods.dflash.model import DFlashDraftModel, OutputNumerics, block_logits, embed_block, output_numerics
from verifier.methods.dflash.proposer import target_geometry
from verifier.build_cache import cached_build
from verifier.tiny.qwen3 import Training, _fit, corpus_token_stream
from verifier.tiny.tokenizer import MASK_TOKEN

# What the chat template puts right before the model's reply.
REPLY_OPENING = "<|assistant|>\n"

SOURCE_FILES = (
    Path(__file__),
    Path(__file__).with_name("qwen3.py"),
    Path(__file__).with_name("tokenizer.py"),
    Path(__file__).with_name("corpus.txt"),
    *(Path(__file__).parent.parent / "methods" / "dflash" / f"{name}.py" for name in ("config", "model", "proposer")),
)


@dataclass(frozen=True)
class DrafterShape:
    num_hidden_layers: int = 2
    block_size: int = 8
    # Target layers whose outputs are fused; z-lab's default spacing (1 .. N-3) degenerates on a 4-layer target.
    # Not the last layer: llama.cpp reads fused layer i as the input of layer i + 1, which the last one lacks.
    target_layer_ids: tuple[int, ...] = (0, 2)


@dataclass(frozen=True)
class DrafterTraining:
    sequences: int = 128  # greedy continuations of corpus windows
    prefix_length: int = 16
    continuation_length: int = 80
    anchors_per_sequence: int = 8  # blocks packed into one pass per sequence
    # z-lab's position decay: weight of draft position k (1-based) is exp(-(k - 1) / gamma); 4 for blocks of 8.
    loss_decay_gamma: float = 4.0
    init_std: float = 0.02
    # The tiny models' shared AdamW schedule; batch_size counts sequences, sequence_length = prefix + continuation.
    schedule: Training = field(
        default_factory=lambda: Training(steps=400, batch_size=16, sequence_length=96, learning_rate=3e-3, seed=2)
    )


def build_settings(shape: DrafterShape, training: DrafterTraining, trained: bool) -> dict[str, object]:
    """Everything that determines a build's output, for cache keys."""
    return {"shape": asdict(shape), "training": asdict(training), "trained": trained, "torch": torch.__version__}


def drafter_config(target_config: dict[str, Any], mask_token_id: int, shape: DrafterShape) -> dict[str, Any]:
    """config.json in z-lab's DFlash v1 format (Qwen3 geometry + DFlash fields; no `auto_map`)."""
    # Multimodal publications (Qwen3.5, Gemma-4) keep the text model's geometry under `text_config`.
    target_config = target_config.get("text_config") or target_config
    rope_parameters = target_config.get("rope_parameters") or {}
    rope_theta = target_config.get("rope_theta", rope_parameters.get("rope_theta", 10000.0))
    hidden, heads = target_config["hidden_size"], target_config["num_attention_heads"]
    # MoE and MLA targets lack some dense-attention fields; the drafter's own geometry only needs to be sane.
    kv_heads = target_config.get("num_key_value_heads") or heads
    return {
        "architectures": [DFLASH_ARCHITECTURE],
        "model_type": "qwen3",
        "block_size": shape.block_size,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(shape.target_layer_ids)},
        "num_target_layers": target_config["num_hidden_layers"],
        "num_hidden_layers": shape.num_hidden_layers,
        "hidden_size": target_config["hidden_size"],
        "intermediate_size": target_config.get("intermediate_size") or 2 * hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads if heads % kv_heads == 0 else heads,
        "head_dim": target_config.get("head_dim") or hidden // heads,
        "hidden_act": "silu",
        "layer_types": ["full_attention"] * shape.num_hidden_layers,
        "sliding_window": None,
        "use_sliding_window": False,
        "max_window_layers": shape.num_hidden_layers,
        "rope_theta": rope_theta,
        "rope_scaling": None,
        "max_position_embeddings": target_config.get("max_position_embeddings", 1024),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "rms_norm_eps": target_config.get("rms_norm_eps", 1e-6),
        "vocab_size": target_config["vocab_size"],
        "tie_word_embeddings": True,
        "bos_token_id": target_config.get("bos_token_id"),
        "eos_token_id": target_config.get("eos_token_id"),
        "dtype": "float32",
    }


def _prefix_starts(
    stream: torch.Tensor, reply_opening: list[int], training: DrafterTraining, generator: torch.Generator
) -> torch.Tensor:
    """Window starts: half end right where an assistant reply opens (like the prompts drafters serve), half random."""
    opening = torch.tensor(reply_opening)
    windows = stream.unfold(0, opening.numel(), 1)
    reply_starts = torch.nonzero((windows == opening).all(dim=1))[:, 0] + opening.numel() - training.prefix_length
    reply_starts = reply_starts[reply_starts >= 0]
    at_replies = training.sequences // 2
    picked = reply_starts[torch.randint(0, reply_starts.numel(), (at_replies,), generator=generator)]
    anywhere = torch.randint(
        0, stream.numel() - training.prefix_length, (training.sequences - at_replies,), generator=generator
    )
    return torch.cat([picked, anywhere])


def _greedy_sequences(
    target: Any, stream: torch.Tensor, reply_opening: list[int], training: DrafterTraining
) -> torch.Tensor:
    """[sequences, prefix + continuation]: corpus windows continued by the target's own greedy choices."""
    from transformers import DynamicCache

    generator = torch.Generator().manual_seed(training.schedule.seed)
    starts = _prefix_starts(stream, reply_opening, training, generator)
    tokens = stream[starts[:, None] + torch.arange(training.prefix_length)]
    cache = DynamicCache()
    step_input = tokens
    for _ in range(training.continuation_length):
        logits = target(input_ids=step_input, cache=cache, use_cache=True).logits[:, -1]
        step_input = logits.argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, step_input], dim=1)
    return tokens


def _packed_visibility(anchors: torch.Tensor, context_length: int, block_size: int) -> torch.Tensor:
    """[Q, T + Q] bool for blocks packed side by side: each sees the context before its anchor and itself."""
    block_of_query = torch.arange(anchors.numel()).repeat_interleave(block_size)
    sees_context = torch.arange(context_length)[None, :] < anchors[block_of_query][:, None]
    sees_block = block_of_query[:, None] == block_of_query[None, :]
    return torch.cat([sees_context, sees_block], dim=1)


def packed_block_logits(
    draft: DFlashDraftModel,
    tokens: torch.Tensor,
    features: torch.Tensor,
    anchors: torch.Tensor,
    mask_token_id: int,
    embedding: torch.Tensor,
    lm_head: Any,
    numerics: OutputNumerics,
    block_size: int,
) -> torch.Tensor:
    """The training path: draft logits [R, A, B - 1, V] of the blocks `[token at anchor, mask x (B - 1)]` for every
    anchor in `anchors` [A] and row of `tokens` [R, L], all in one pass over the fused target `features` [R, L, k*H].

    Each block sees the context before its anchor, as the proposer's block sees the committed rows before the
    pending token; both embed and project through `embed_block` and `block_logits`.
    """
    rows, length = tokens.shape
    block_positions = (anchors[:, None] + torch.arange(block_size)).flatten()
    block_ids = torch.full((rows, block_positions.numel()), mask_token_id, dtype=torch.long)
    block_ids[:, ::block_size] = tokens[:, anchors]
    hidden = draft(
        embed_block(block_ids, embedding, numerics),
        block_positions,
        features,
        torch.arange(length),
        visibility=_packed_visibility(anchors, length, block_size),
    )
    hidden = hidden.view(rows, -1, block_size, hidden.shape[-1])[:, :, 1:]
    return block_logits(hidden, lm_head, numerics)


def _train(
    draft: DFlashDraftModel,
    target: Any,
    tokenizer: Any,
    mask_token_id: int,
    numerics: OutputNumerics,
    shape: DrafterShape,
    training: DrafterTraining,
) -> float:
    """Block-diffusion training on the target's greedy continuations; returns the last loss.

    Block embeddings and logits go through the same functions as inference (`embed_block`, `block_logits`), so the
    drafter trains on the numerics it is run with (Gemma's embedding scale and soft-capping included).
    """
    with torch.no_grad():
        reply_opening = tokenizer.encode(REPLY_OPENING, add_special_tokens=False)
        sequences = _greedy_sequences(target, corpus_token_stream(tokenizer), reply_opening, training)
        hidden_states = target(input_ids=sequences, output_hidden_states=True).hidden_states
        features = torch.cat([hidden_states[i + 1] for i in shape.target_layer_ids], dim=-1)
    embedding = target.get_input_embeddings().weight.detach()
    lm_head = target.get_output_embeddings()
    block, length = shape.block_size, sequences.shape[1]
    schedule = training.schedule
    decay = torch.exp(-torch.arange(block - 1, dtype=torch.float32) / training.loss_decay_gamma)
    weights = decay.repeat(schedule.batch_size * training.anchors_per_sequence)
    # An anchor's labels must all be the target's greedy choices: anchor + 1 >= prefix, anchor + B - 1 < length.
    lowest_anchor, highest_anchor = training.prefix_length - 1, length - block
    generator = torch.Generator().manual_seed(schedule.seed + 1)
    batches = [
        (
            torch.randint(0, sequences.shape[0], (schedule.batch_size,), generator=generator),
            torch.randint(lowest_anchor, highest_anchor + 1, (training.anchors_per_sequence,), generator=generator),
        )
        for _ in range(schedule.steps)
    ]

    def block_loss(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        rows, anchors = batch
        tokens = sequences[rows]
        block_positions = (anchors[:, None] + torch.arange(block)).flatten()
        labels = tokens[:, block_positions].view(rows.numel(), -1, block)[:, :, 1:]
        logits = packed_block_logits(
            draft, tokens, features[rows], anchors, mask_token_id, embedding, lm_head, numerics, block
        )
        token_losses = F.cross_entropy(logits.flatten(0, 2), labels.flatten(), reduction="none")
        return (token_losses * weights).sum() / weights.sum()

    return _fit(draft, batches, schedule, block_loss)


def _initialise(draft: DFlashDraftModel, std: float) -> None:
    for name, parameter in draft.named_parameters():
        if name.endswith("norm.weight"):
            torch.nn.init.ones_(parameter)
        elif name.endswith(".bias"):
            torch.nn.init.zeros_(parameter)
        else:
            torch.nn.init.normal_(parameter, mean=0.0, std=std)


def build_dflash_drafter(
    target_dir: Path,
    out_dir: Path,
    trained: bool = True,
    shape: DrafterShape = DrafterShape(),
    training: DrafterTraining = DrafterTraining(),
) -> Path:
    """Write a DFlash v1 drafter for the target in `target_dir` into `out_dir` (config.json, model.safetensors)."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    target_dir, out_dir = Path(target_dir), Path(out_dir)
    target_config = read_config(target_dir)
    tokenizer = AutoTokenizer.from_pretrained(target_dir, local_files_only=True)
    mask_token_id = tokenizer.convert_tokens_to_ids(MASK_TOKEN)
    config = drafter_config(target_config, mask_token_id, shape)
    torch.manual_seed(training.schedule.seed)
    parsed = parse_dflash_config(config)
    draft = DFlashDraftModel(parsed, len(shape.target_layer_ids))
    _initialise(draft, training.init_std)
    if trained:
        target = load_causal_lm(target_dir, device=torch.device("cpu"), dtype=torch.float32)
        for parameter in target.parameters():
            parameter.requires_grad_(False)
        numerics = output_numerics(parsed, target_geometry(target))
        _train(draft, target, tokenizer, mask_token_id, numerics, shape, training)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    weights = {name: tensor.detach().contiguous() for name, tensor in draft.state_dict().items()}
    save_file(weights, out_dir / "model.safetensors", metadata={"format": "pt"})
    return out_dir


def cached_dflash_drafter(
    cache_root: Path, target_dir: Path, *, trained: bool = True, shape: DrafterShape = DrafterShape()
) -> Path:
    """The tiny DFlash drafter for `target_dir` (a `cached_target` folder) under `cache_root`."""
    settings = {**build_settings(shape, DrafterTraining(), trained), "target": Path(target_dir).name}
    return cached_build(
        cache_root,
        f"tiny-dflash-{'trained' if trained else 'random'}",
        lambda out_dir: build_dflash_drafter(target_dir, out_dir, trained=trained, shape=shape),
        source_files=SOURCE_FILES,
        settings=settings,
    )
