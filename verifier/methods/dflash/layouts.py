"""DFlash drafters in the layouts other than z-lab's, mapped onto z-lab's draft model
(`verifier.methods.dflash.model`).

- speculators (vLLM, RedHatAI `*.dflash`): `speculators_model_type: "dflash"`; the geometry sits in
  `transformer_layer_config` (a Qwen3 config, saved as a diff against its class defaults), `block_size` and
  `mask_token_id` at the top, `aux_hidden_state_layer_ids` count hidden states (0 = embeddings: z-lab id + 1). The
  backbone tensors carry z-lab's names; a reduced draft vocabulary adds `lm_head.weight` [Dv, H] with `d2t`/`t2d`
  (without one the target's LM head is used); the embedding is always the target's.
- DeepSpec (DeepSeek's `dflash_*` research checkpoints): z-lab's config and backbone names plus the drafter's own
  `embed_tokens.weight` and `lm_head.weight` (copies of the target's, trained frozen), which are used as stored.

Everything else about drafting (context cache, block, masks, numerics) is z-lab's, unchanged. `sample_from_anchor`
drafters (the anchor slot drafts too) are refused: no engine here runs that variant yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from verifier.folders import weight_files
from registry.domain.measurement import RunSettings
from verifier.harness.contract import given_draft_length
from verifier.loading import LoadedTarget
from verifier.methods.dflash.config import (
    DFLASH_ARCHITECTURE,
    DFlashConfig,
    DFlashFormatError,
    parse_dflash_config,
)
from verifier.methods.dflash.model import DFlashDraftModel, OutputNumerics, embed_block, output_numerics
from verifier.methods.dflash.proposer import DFlashProposer, draft_model_from, read_drafter_weights, served_target
from verifier.methods.dflash.proposer import build_proposer as build_zlab_proposer
from verifier.proposer import Proposal

Z_LAB = "z-lab"
SPECULATORS = "speculators"
DEEPSPEC = "deepspec"
# Tensors outside z-lab's backbone that a layout may carry, and how the proposer uses them.
EXTRA_TENSORS = ("embed_tokens.weight", "lm_head.weight", "d2t", "t2d")


def stored_tensor_names(drafter_dir: Path) -> list[str]:
    from safetensors import safe_open

    names: list[str] = []
    for path in weight_files(drafter_dir):
        with safe_open(path, framework="pt") as handle:
            names.extend(handle.keys())
    return names


def detect_layout(raw: Mapping[str, Any], tensor_names: list[str]) -> str:
    if raw.get("speculators_model_type") is not None:
        if raw["speculators_model_type"] not in ("dflash", "dspark"):
            raise DFlashFormatError(f"speculators_model_type {raw['speculators_model_type']!r} is not 'dflash'")
        return SPECULATORS
    if "embed_tokens.weight" in tensor_names or "lm_head.weight" in tensor_names:
        return DEEPSPEC
    return Z_LAB


def zlab_config(raw: Mapping[str, Any], *, anchor_drafts: bool = False) -> dict[str, Any]:
    """A speculators DFlash (or DSpark, `anchor_drafts`) config in z-lab's config.json terms (read natively, never
    executed)."""
    from transformers import Qwen3Config

    if raw.get("sample_from_anchor") and not anchor_drafts:
        raise DFlashFormatError(
            "this speculators DFlash drafter samples from the anchor slot (sample_from_anchor: true); "
            "only drafters whose anchor is the last committed token run here"
        )
    layer = raw.get("transformer_layer_config")
    if not isinstance(layer, Mapping):
        raise DFlashFormatError("speculators config lacks the transformer_layer_config object")
    if layer.get("model_type", "qwen3") != "qwen3":
        raise DFlashFormatError(f"decoder layer type {layer.get('model_type')!r} is not supported (qwen3)")
    known = {k: v for k, v in layer.items() if k not in ("architectures", "auto_map", "model_type", "transformers_version")}
    try:
        full = Qwen3Config(**known).to_dict()  # speculators saves a diff against Qwen3Config's defaults
    except (TypeError, ValueError, KeyError) as error:
        raise DFlashFormatError(f"transformer_layer_config does not read as qwen3: {error}") from error
    aux = raw.get("aux_hidden_state_layer_ids")
    if aux is not None and (not isinstance(aux, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in aux)):
        raise DFlashFormatError(f"aux_hidden_state_layer_ids must be a list of integers, got {aux!r}")
    zlab = {k: v for k, v in full.items() if k not in ("architectures", "auto_map")}
    zlab |= {
        "architectures": [DFLASH_ARCHITECTURE],
        "block_size": raw.get("block_size", 8),
        "dflash_config": {
            "mask_token_id": raw.get("mask_token_id"),
            "target_layer_ids": None if aux is None else [i - 1 for i in aux],
        },
    }
    if raw.get("sliding_window_non_causal") and "sliding_attention" in (full.get("layer_types") or []):
        zlab["is_causal"] = False
    return zlab


def draft_vocab_map(tensors: dict[str, torch.Tensor], target_vocab: int) -> torch.Tensor | None:
    """Target id of each draft id when `lm_head` speaks a reduced vocabulary (d2t offsets), else None."""
    head = tensors.get("lm_head.weight")
    if head is None or head.shape[0] == target_vocab:
        return None
    d2t = tensors.get("d2t")
    if d2t is None or d2t.shape != (head.shape[0],):
        raise DFlashFormatError(
            f"lm_head.weight has {head.shape[0]} rows (a reduced draft vocabulary) but no d2t tensor of that length"
        )
    mapped = torch.arange(head.shape[0]) + d2t.long()
    if int(mapped.min()) < 0 or int(mapped.max()) >= target_vocab:
        raise DFlashFormatError(f"d2t maps draft ids outside the target vocabulary [0, {target_vocab})")
    return mapped


def load_backbone(
    drafter_dir: Path,
    tensors: dict[str, torch.Tensor],
    config: DFlashConfig,
    num_fused: int,
    layout: str,
    *,
    device: torch.device,
    dtype: torch.dtype,
) -> DFlashDraftModel:
    backbone = {name: t for name, t in tensors.items() if name not in EXTRA_TENSORS}
    return draft_model_from(drafter_dir, backbone, config, num_fused, layout, device=device, dtype=dtype)


class LayoutDFlashProposer(DFlashProposer):
    """z-lab's proposer with the drafter's own embedding / LM head and a reduced draft vocabulary where stored."""

    def __init__(
        self,
        draft_model: DFlashDraftModel,
        target_model: Any,
        *,
        layer_ids: tuple[int, ...],
        mask_token_id: int,
        numerics: OutputNumerics,
        draft_length: int,
        embedding: torch.Tensor | None,
        lm_head: nn.Module | None,
        to_target: torch.Tensor | None,
        target_vocab: int,
    ) -> None:
        super().__init__(
            draft_model,
            target_model,
            layer_ids=layer_ids,
            mask_token_id=mask_token_id,
            numerics=numerics,
            draft_length=draft_length,
        )
        if embedding is not None:
            self.embedding_weight = embedding
            mask_ids = torch.full((1, self.block_size - 1), mask_token_id, device=embedding.device)
            with torch.inference_mode():
                self.mask_embeds = embed_block(mask_ids, embedding, numerics)
        if lm_head is not None:
            self.lm_head = lm_head
        self.to_target = to_target
        self.target_vocab = target_vocab

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        if self.to_target is None:
            return super().propose(temperature, generator)
        logits = self.draft_logits().float()
        if temperature <= 0:
            return Proposal(tokens=self.to_target[logits.argmax(dim=-1)])
        q_draft = torch.softmax(logits / temperature, dim=-1)
        draft_ids = torch.multinomial(q_draft, 1, generator=generator)[:, 0]
        q_probs = torch.zeros(q_draft.shape[0], self.target_vocab, device=q_draft.device)
        q_probs[:, self.to_target] = q_draft
        return Proposal(tokens=self.to_target[draft_ids], q_probs=q_probs)


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   raw_config: dict[str, Any]) -> DFlashProposer:
    """A DFlash proposer for any known layout; z-lab's folders go to `verifier.methods.dflash.proposer`
    unchanged."""
    drafter_dir = Path(drafter_dir)
    layout = detect_layout(raw_config, stored_tensor_names(drafter_dir))
    if layout == Z_LAB:
        return build_zlab_proposer(drafter_dir, target, settings, raw_config)
    config = parse_dflash_config(zlab_config(raw_config) if layout == SPECULATORS else raw_config)
    served = served_target(config, target)
    geometry, mask_token_id, layer_ids = served.geometry, served.mask_token_id, served.layer_ids
    device, dtype = served.device, served.dtype
    tensors = read_drafter_weights(drafter_dir)
    model = load_backbone(drafter_dir, tensors, config, len(layer_ids), layout, device=device, dtype=dtype)
    to_target = draft_vocab_map(tensors, geometry.vocab_size)
    lm_head = None
    if "lm_head.weight" in tensors:
        head = tensors["lm_head.weight"]
        if head.shape[1] != config.hidden_size:
            raise DFlashFormatError(f"lm_head.weight has shape {list(head.shape)}; its width must be {config.hidden_size}")
        lm_head = nn.Linear(head.shape[1], head.shape[0], bias=False, device=device, dtype=dtype)
        with torch.no_grad():
            lm_head.weight.copy_(head)
    embedding = tensors.get("embed_tokens.weight")
    if embedding is not None and tuple(embedding.shape) != (geometry.vocab_size, config.hidden_size):
        raise DFlashFormatError(
            f"embed_tokens.weight has shape {list(embedding.shape)}, expected {[geometry.vocab_size, config.hidden_size]}"
        )
    return LayoutDFlashProposer(
        model,
        target.model,
        layer_ids=layer_ids,
        mask_token_id=mask_token_id,
        numerics=output_numerics(config, geometry),
        draft_length=given_draft_length(settings),
        embedding=None if embedding is None else embedding.to(device=device, dtype=dtype),
        lm_head=lm_head,
        to_target=None if to_target is None else to_target.to(device),
        target_vocab=geometry.vocab_size,
    )
