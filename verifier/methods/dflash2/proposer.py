"""DFlash 2 drafters in the decode loop: weights read from the drafter's own safetensors under the names llama.cpp's
converter expects (never the publisher's code), a DFlash v1 round with the convolutions, and the selector's walk.

Sampling: the selector's walk is deterministic (llama.cpp drafts it the same way at every temperature), so the
drafting distribution q is exactly a point mass on each drafted token; proposals carry no `q_probs`, which the loop
reads as that point mass, and sampled output stays exactly the target's distribution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from registry.domain.measurement import RunSettings
from verifier.harness.contract import given_draft_length
from verifier.loading import LoadedTarget
from verifier.methods.dflash.config import DFlashFormatError, TargetGeometry, layout_problems
from verifier.methods.dflash.model import OutputNumerics, block_logits, output_numerics
from verifier.methods.dflash.proposer import DFlashProposer, read_drafter_weights, served_target
from verifier.methods.dflash2.config import DFlash2Config, expected_dflash2_shapes, parse_dflash2_config, unprefixed
from verifier.methods.dflash2.model import DFlash2DraftModel
from verifier.proposer import Proposal

CODEBOOK = "candidate_selector.predecessor_codebook"


def load_dflash2_model(
    drafter_dir: Path,
    tensors: dict[str, torch.Tensor],
    config: DFlash2Config,
    num_fused_layers: int,
    vocab_size: int,
    *,
    device: torch.device,
    dtype: torch.dtype,
) -> DFlash2DraftModel:
    """The draft model with `tensors` (unprefixed names); anything but the exact DFlash 2 layout is refused by name."""
    expected = expected_dflash2_shapes(config, num_fused_layers, vocab_size)
    problems = layout_problems({name: tuple(t.shape) for name, t in tensors.items()}, expected)
    if problems:
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise DFlashFormatError(f"{drafter_dir}: the weights do not follow the DFlash 2 layout: {shown}")
    with torch.device("meta"):
        model = DFlash2DraftModel(config, num_fused_layers, vocab_size)
    model.load_state_dict(tensors, strict=True, assign=True)
    return model.to(device=device, dtype=dtype).eval()


class DFlash2Proposer(DFlashProposer):
    """One DFlash 2 block per round; the drafts are the selector's walk over the block's top-k candidates."""

    def __init__(
        self,
        draft_model: DFlash2DraftModel,
        target_model: Any,
        *,
        layer_ids: tuple[int, ...],
        mask_token_id: int,
        numerics: OutputNumerics,
        draft_length: int,
    ) -> None:
        super().__init__(
            draft_model,
            target_model,
            layer_ids=layer_ids,
            mask_token_id=mask_token_id,
            numerics=numerics,
            draft_length=draft_length,
        )
        self.selector = draft_model.candidate_selector

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        anchor = torch.tensor(self.anchor_token, device=self.embedding_weight.device)
        hidden = self.draft_hidden()
        logits = block_logits(hidden, self.lm_head, self.numerics)
        return Proposal(tokens=self.selector.walk(logits, hidden, anchor))


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings,
                   raw_config: dict[str, Any]) -> DFlash2Proposer:
    """A DFlash 2 proposer for `target`; raises `IncompatiblePair` when the drafter cannot serve this target."""
    drafter_dir = Path(drafter_dir)
    config = parse_dflash2_config(raw_config)
    tensors = unprefixed(read_drafter_weights(drafter_dir))
    codebook = tensors.get(CODEBOOK)

    def codebook_problems(geometry: TargetGeometry) -> list[str]:
        if codebook is not None and codebook.ndim == 2 and codebook.shape[0] != geometry.vocab_size:
            return [f"the selector's codebooks cover {codebook.shape[0]} token ids, the target's vocabulary has "
                    f"{geometry.vocab_size}"]
        return []

    served = served_target(config.backbone, target, codebook_problems)
    geometry, mask_token_id, layer_ids = served.geometry, served.mask_token_id, served.layer_ids
    model = load_dflash2_model(
        drafter_dir, tensors, config, len(layer_ids), geometry.vocab_size, device=served.device, dtype=served.dtype
    )
    return DFlash2Proposer(
        model,
        target.model,
        layer_ids=layer_ids,
        mask_token_id=mask_token_id,
        numerics=output_numerics(config.backbone, geometry),
        draft_length=given_draft_length(settings),
    )
