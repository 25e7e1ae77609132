"""DFlash 2 drafter configs, without torch: the DFlash v1 fields plus the convolution and selector settings, and the
exact tensor names and shapes that llama.cpp's converter (`conversion/qwen.py`, `DFlashModel`) reads.

A DFlash 2 config is z-lab's DFlash config with `architectures: ["DFlash2DraftModel"]` and four more fields in
`dflash_config`: `conv_kernel_size`, `conv_group_size`, `selector_rank`, `selector_top_k`. Its tensors are z-lab's
v1 names plus, per layer, `layers.{i}.attention_conv.{base_kernel, kernel_projection.weight}` and
`layers.{i}.mlp_conv.{base_kernel, kernel_projection.weight}`, and `candidate_selector.{predecessor_codebook,
successor_codebook, hidden_projection.weight}`. The converter prefixes every name with `model.` when it lacks one,
so both spellings are read here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verifier.methods.dflash.config import (
    DFLASH2_ARCHITECTURE,
    DFLASH_ARCHITECTURE,
    DFlashConfig,
    DFlashFormatError,
    expected_weight_shapes,
    parse_dflash_config,
)

CONVOLUTIONS = ("attention_conv", "mlp_conv")
MODEL_PREFIX = "model."
# Fields llama.cpp reads for DFlash drafters that this implementation does not model; refused rather than ignored.
UNSUPPORTED_FIELDS = ("attention_value_scale", "partial_rotary_factor")


@dataclass(frozen=True)
class DFlash2Config:
    backbone: DFlashConfig
    conv_kernel_size: int
    conv_group_size: int
    selector_rank: int
    selector_top_k: int

    @property
    def conv_groups(self) -> int:
        return self.backbone.hidden_size // self.conv_group_size


def _section_int(section: Mapping[str, Any], name: str) -> int:
    value = section.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise DFlashFormatError(f"dflash_config.{name} must be a positive integer for a DFlash 2 drafter, got {value!r}")
    return value


def parse_dflash2_config(raw: Mapping[str, Any]) -> DFlash2Config:
    """Read a DFlash 2 config.json (already parsed); raises `DFlashFormatError` naming the first bad field."""
    architectures = raw.get("architectures") or []
    if DFLASH2_ARCHITECTURE not in architectures:
        raise DFlashFormatError(f"architectures {architectures!r} do not name {DFLASH2_ARCHITECTURE}")
    section = raw.get("dflash_config")
    if not isinstance(section, Mapping):
        raise DFlashFormatError("a DFlash 2 config needs its dflash_config object (convolution and selector settings)")
    for name in UNSUPPORTED_FIELDS:
        if section.get(name) is not None or raw.get(name) is not None:
            raise DFlashFormatError(f"{name} is not supported for DFlash 2 drafters here")
    if raw.get("rope_is_neox_style") is False:
        raise DFlashFormatError("interleaved rope (rope_is_neox_style: false) is not supported for DFlash 2 drafters")
    backbone = parse_dflash_config({**raw, "architectures": [DFLASH_ARCHITECTURE]})
    config = DFlash2Config(
        backbone=backbone,
        conv_kernel_size=_section_int(section, "conv_kernel_size"),
        conv_group_size=_section_int(section, "conv_group_size"),
        selector_rank=_section_int(section, "selector_rank"),
        selector_top_k=_section_int(section, "selector_top_k"),
    )
    hidden, top_k = backbone.hidden_size, config.selector_top_k
    if hidden % config.conv_group_size:
        raise DFlashFormatError(f"hidden_size {hidden} is not a multiple of dflash_config.conv_group_size "
                                f"{config.conv_group_size}")
    # llama.cpp packs each position's candidates and k x k transition scores into one hidden-size row.
    if hidden < top_k * (top_k + 1):
        raise DFlashFormatError(f"dflash_config.selector_top_k {top_k} needs hidden_size >= {top_k * (top_k + 1)} "
                                f"(llama.cpp's selector lattice), got {hidden}")
    return config


def expected_dflash2_shapes(config: DFlash2Config, num_fused_layers: int, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """Every tensor of a DFlash 2 drafter by its unprefixed name; `vocab_size` is the target's (the codebooks are
    indexed by target token ids)."""
    hidden = config.backbone.hidden_size
    kernel = config.conv_kernel_size
    shapes = expected_weight_shapes(config.backbone, num_fused_layers)
    for i in range(config.backbone.num_hidden_layers):
        for conv in CONVOLUTIONS:
            # [side (0 = input, 1 = output), tap, channel]; the projection gives a coefficient per side, tap, group.
            shapes[f"layers.{i}.{conv}.base_kernel"] = (2, kernel, hidden)
            shapes[f"layers.{i}.{conv}.kernel_projection.weight"] = (2 * kernel * config.conv_groups, hidden)
    shapes |= {
        "candidate_selector.predecessor_codebook": (vocab_size, config.selector_rank),
        "candidate_selector.successor_codebook": (vocab_size, config.selector_rank),
        "candidate_selector.hidden_projection.weight": (config.selector_rank, hidden),
    }
    return shapes


def unprefixed(names: Mapping[str, Any]) -> dict[str, Any]:
    """The stored tensors by unprefixed name (`model.x` -> `x`), as the converter treats both the same; a name
    stored both ways is refused."""
    result: dict[str, Any] = {}
    for name, value in names.items():
        key = name[len(MODEL_PREFIX):] if name.startswith(MODEL_PREFIX) else name
        if key in result:
            raise DFlashFormatError(f"tensor {key} is stored twice (with and without the {MODEL_PREFIX!r} prefix)")
        result[key] = value
    return result
