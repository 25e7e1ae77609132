"""DFlash v1 drafters (z-lab layout) in the decode loop: the weights loaded from the drafter's own
`model.safetensors` with z-lab's published tensor names (the publisher's `dflash.py`, `auto_map`, is never run),
and the proposer that drafts one block per round. The drafter borrows the target's embedding table and LM head.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from verifier.decode import rollback_problem
from verifier.folders import weight_files
from verifier.harness.contract import IncompatiblePair, given_draft_length
from registry.domain.measurement import RunSettings
from verifier.loading import LoadedTarget
from verifier.methods.dflash.config import (
    MASK_TOKEN_TEXT,
    DFlashConfig,
    DFlashFormatError,
    TargetGeometry,
    compatibility_problems,
    expected_weight_shapes,
    layout_problems,
    parse_dflash_config,
)
from verifier.methods.dflash.model import (
    ContextCache,
    DFlashDraftModel,
    OutputNumerics,
    block_logits,
    embed_block,
    output_numerics,
)
from verifier.proposer import Proposal, TargetOutput


def target_geometry(model: Any) -> TargetGeometry:
    text_config = model.config.get_text_config()
    softcap = getattr(text_config, "final_logit_softcapping", None)
    return TargetGeometry(
        model_type=str(getattr(text_config, "model_type", "")),
        hidden_size=int(text_config.hidden_size),
        num_hidden_layers=int(text_config.num_hidden_layers),
        vocab_size=int(text_config.vocab_size),
        final_logit_softcapping=None if softcap is None else float(softcap),
    )


def resolve_mask_token_id(config: DFlashConfig, tokenizer: Any) -> int | None:
    """The config's mask id, else the target tokenizer's `<|MASK|>` (how pre-2026-02-05 drafters were used)."""
    if config.mask_token_id is not None:
        return config.mask_token_id
    if tokenizer is None:
        return None
    token_id = tokenizer.convert_tokens_to_ids(MASK_TOKEN_TEXT)
    unknown = getattr(tokenizer, "unk_token_id", None)
    return None if token_id is None or token_id == unknown else int(token_id)


def read_drafter_weights(drafter_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for path in weight_files(drafter_dir):
        try:
            part = load_file(path)
        except (SafetensorError, OSError) as error:
            raise DFlashFormatError(f"{path} is not a readable safetensors file: {error}") from error
        duplicated = sorted(set(part) & set(tensors))
        if duplicated:
            raise DFlashFormatError(f"{path} repeats tensors already read: {', '.join(duplicated[:5])}")
        tensors |= part
    return tensors


def load_draft_model(
    drafter_dir: Path, config: DFlashConfig, num_fused_layers: int, *, device: torch.device, dtype: torch.dtype
) -> DFlashDraftModel:
    """The draft model with the folder's weights; refuses anything but z-lab's exact layout."""
    return draft_model_from(drafter_dir, read_drafter_weights(drafter_dir), config, num_fused_layers, "v1",
                            device=device, dtype=dtype)


def draft_model_from(
    drafter_dir: Path,
    tensors: dict[str, torch.Tensor],
    config: DFlashConfig,
    num_fused_layers: int,
    layout: str,
    *,
    device: torch.device,
    dtype: torch.dtype,
) -> DFlashDraftModel:
    """The draft model over exactly these tensors; refuses, naming them, any that do not fit the v1 backbone."""
    problems = layout_problems(
        {name: tuple(t.shape) for name, t in tensors.items()}, expected_weight_shapes(config, num_fused_layers)
    )
    if problems:
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise DFlashFormatError(f"{drafter_dir}: the weights do not follow the DFlash {layout} layout: {shown}")
    # Built on the meta device so a large drafter is not randomly initialised only to be overwritten.
    with torch.device("meta"):
        model = DFlashDraftModel(config, num_fused_layers)
    model.load_state_dict(tensors, strict=True, assign=True)
    return model.to(device=device, dtype=dtype).eval()


class DFlashProposer:
    """Drafts one block per round with a DFlash drafter; greedy or sampled (with q rows for rejection sampling)."""

    needs_hidden_states = True

    def __init__(
        self,
        draft_model: DFlashDraftModel,
        target_model: Any,
        *,
        layer_ids: tuple[int, ...],
        mask_token_id: int,
        numerics: OutputNumerics,
        draft_length: int,
    ) -> None:
        self.draft_model = draft_model
        self.layer_ids = layer_ids
        self.block_size = draft_model.config.block_size
        self.mask_token_id = mask_token_id
        self.numerics = numerics
        self.draft_length = draft_length
        self.embedding_weight = target_model.get_input_embeddings().weight
        self.lm_head = target_model.get_output_embeddings()
        # Only the anchor changes between rounds; the mask rows of the block are embedded once.
        mask_ids = torch.full((1, self.block_size - 1), mask_token_id, device=self.embedding_weight.device)
        with torch.inference_mode():
            self.mask_embeds = embed_block(mask_ids, self.embedding_weight, numerics)
        self.cache = ContextCache()
        self.pending_context: torch.Tensor | None = None  # fused features of committed rows not yet in the cache
        self.pending_start = 0
        self.anchor_token = 0
        self.anchor_position = 0

    def _take_context(self, target_out: TargetOutput) -> None:
        self.pending_context = torch.cat([target_out.layer_output(i) for i in self.layer_ids], dim=-1)
        self.pending_start = target_out.start
        self.anchor_token = target_out.pending_token
        self.anchor_position = target_out.end

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.cache = ContextCache()
        self._take_context(target_out)

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self._take_context(target_out)

    def draft_logits(self) -> torch.Tensor:
        """Logits [draft_length, V] after the anchor; moves the pending context into the cache."""
        return block_logits(self.draft_hidden(), self.lm_head, self.numerics)

    def draft_hidden(self) -> torch.Tensor:
        """Final hidden states [draft_length, H] after the anchor; moves the pending context into the cache.

        The whole trained block is drafted even when fewer tokens are proposed: attention inside it is
        non-causal, so a shorter block would change every position.
        """
        return self.block_hidden()[1 : 1 + self.draft_length]

    def block_hidden(self) -> torch.Tensor:
        """Final hidden states [block_size, H] of the whole block, anchor slot first; moves the pending context
        into the cache."""
        if self.pending_context is None:
            raise RuntimeError("propose() was called before begin()")
        device = self.embedding_weight.device
        anchor = torch.tensor([[self.anchor_token]], device=device)
        anchor_embeds = embed_block(anchor, self.embedding_weight, self.numerics)
        context_length = int(self.pending_context.shape[1])
        hidden = self.draft_model(
            torch.cat([anchor_embeds, self.mask_embeds], dim=1).to(self.pending_context.dtype),
            torch.arange(self.anchor_position, self.anchor_position + self.block_size, device=device),
            self.pending_context,
            torch.arange(self.pending_start, self.pending_start + context_length, device=device),
            cache=self.cache,
        )
        self.pending_context = self.pending_context[:, :0]
        self.pending_start += context_length
        return hidden[0]

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        logits = self.draft_logits().float()
        if temperature <= 0:
            return Proposal(tokens=logits.argmax(dim=-1))
        q_probs = torch.softmax(logits / temperature, dim=-1)
        tokens = torch.multinomial(q_probs, 1, generator=generator)[:, 0]
        return Proposal(tokens=tokens, q_probs=q_probs)


@dataclass(frozen=True)
class ServedTarget:
    """What a DFlash-family drafter needs of the target it was checked against."""

    geometry: TargetGeometry
    mask_token_id: int
    layer_ids: tuple[int, ...]
    device: torch.device
    dtype: torch.dtype


def served_target(
    config: DFlashConfig,
    target: LoadedTarget,
    more_problems: Callable[[TargetGeometry], Iterable[str]] = lambda geometry: (),
) -> ServedTarget:
    """Checks a DFlash-family drafter's config against `target`; raises `IncompatiblePair` with every problem
    (the config's, then `more_problems`, then the target's rollback)."""
    geometry = target_geometry(target.model)
    mask_token_id = resolve_mask_token_id(config, target.tokenizer)
    problems = compatibility_problems(config, geometry, mask_token_id)
    problems.extend(more_problems(geometry))
    rollback = rollback_problem(target.model)
    if rollback is not None:
        problems.append(f"target: {rollback}")
    if problems:
        raise IncompatiblePair(problems)
    assert mask_token_id is not None  # compatibility_problems reports a missing mask id
    parameter = next(target.model.parameters())
    return ServedTarget(geometry, mask_token_id, config.layer_ids_for(geometry.num_hidden_layers),
                        parameter.device, parameter.dtype)


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   raw_config: dict[str, Any]) -> DFlashProposer:
    """A DFlash proposer for `target`; raises `IncompatiblePair` when the drafter cannot serve this target."""

    drafter_dir = Path(drafter_dir)
    config = parse_dflash_config(raw_config)
    served = served_target(config, target)
    geometry, mask_token_id, layer_ids = served.geometry, served.mask_token_id, served.layer_ids
    draft_model = load_draft_model(drafter_dir, config, len(layer_ids), device=served.device, dtype=served.dtype)
    return DFlashProposer(
        draft_model,
        target.model,
        layer_ids=layer_ids,
        mask_token_id=mask_token_id,
        numerics=output_numerics(config, geometry),
        draft_length=given_draft_length(settings),
    )
