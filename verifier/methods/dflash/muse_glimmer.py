"""A DFlash drafter loaded into transformers' own implementation of the same layout (`MuseGlimmerAssistantModel`):
the reference and benchmark counterpart of `verifier.methods.dflash.model`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from registry.local import read_config
from verifier.methods.dflash.config import SLIDING_ATTENTION, DFlashFormatError, parse_dflash_config
from verifier.methods.dflash.proposer import read_drafter_weights


# The only names that differ between z-lab's layout and transformers' MuseGlimmerAssistantModel.
MUSE_GLIMMER_RENAMES = {"fc.weight": "encoder.fc.weight", "hidden_norm.weight": "encoder.output_norm_enc.weight"}


def muse_glimmer_assistant(drafter_dir: Path, target_layers: int, *, device: torch.device, dtype: torch.dtype) -> Any:
    """The drafter loaded into transformers' `MuseGlimmerAssistantModel` (its native DFlash drafter class).

    Only full-attention drafters without attention biases map exactly: transformers' sliding layers are
    bidirectional within the window while z-lab's are causal, and its projections have no biases.
    """
    from transformers import MuseGlimmerAssistantConfig, MuseGlimmerAssistantModel

    config = parse_dflash_config(read_config(drafter_dir))
    if config.attention_bias or SLIDING_ATTENTION in config.layer_types or config.is_causal:
        raise DFlashFormatError(
            "only full-attention DFlash drafters without attention biases map onto MuseGlimmerAssistantModel"
        )
    if config.mask_token_id is None:
        raise DFlashFormatError("MuseGlimmerAssistantModel needs dflash_config.mask_token_id in the drafter's config")
    layer_ids = config.layer_ids_for(target_layers)
    hf_config = MuseGlimmerAssistantConfig(
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        rms_norm_eps=config.rms_norm_eps,
        hidden_act=config.hidden_act,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        layer_types=list(config.layer_types),
        block_size=config.block_size,
        mask_token_id=config.mask_token_id,
        target_layer_ids=list(layer_ids),
    )
    tensors = read_drafter_weights(drafter_dir)
    model = MuseGlimmerAssistantModel(hf_config)
    model.load_state_dict({MUSE_GLIMMER_RENAMES.get(name, name): t for name, t in tensors.items()}, strict=True)
    return model.to(device=device, dtype=dtype).eval()
