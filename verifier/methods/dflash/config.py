"""DFlash v1 drafter configs (z-lab layout), without torch: parsing, the expected weight layout and what a
target must agree with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verifier.folders import LoadError


DFLASH_ARCHITECTURE = "DFlashDraftModel"
DFLASH2_ARCHITECTURE = "DFlash2DraftModel"
FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
# What users added to the target tokenizer before z-lab put `mask_token_id` into the config (2026-02-05).
MASK_TOKEN_TEXT = "<|MASK|>"


class DFlashFormatError(LoadError):
    """A drafter folder does not follow z-lab's DFlash v1 layout; the message names the offending field or tensor."""


@dataclass(frozen=True)
class DFlashConfig:
    """The fields of a z-lab DFlash v1 config.json that the draft model needs."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    attention_bias: bool
    hidden_act: str
    layer_types: tuple[str, ...]
    sliding_window: int | None
    is_causal: bool | None  # None = z-lab's rule: sliding layers causal, full layers not
    block_size: int
    mask_token_id: int | None  # None = not in the config (older drafters); resolved from the target tokenizer
    target_layer_ids: tuple[int, ...] | None  # None = z-lab's default spacing over the target's layers
    num_target_layers: int | None
    input_embedding_scale: float | None  # None = sqrt(H) for Gemma targets, 1 otherwise
    output_multiplier: float
    final_logit_softcapping: float | None

    def layer_ids_for(self, target_layers: int) -> tuple[int, ...]:
        """The target layers whose outputs are fused; explicit ids win over z-lab's default spacing."""
        if self.target_layer_ids is not None:
            return self.target_layer_ids
        return default_target_layer_ids(self.num_target_layers or target_layers, self.num_hidden_layers)

    def is_causal_layer(self, layer_index: int) -> bool:
        if self.is_causal is not None:
            return self.is_causal
        return self.layer_types[layer_index] == SLIDING_ATTENTION

    def window_of_layer(self, layer_index: int) -> int | None:
        return self.sliding_window if self.layer_types[layer_index] == SLIDING_ATTENTION else None


def default_target_layer_ids(num_target_layers: int, count: int) -> tuple[int, ...]:
    """z-lab `build_target_layer_ids`: the middle layer for one, else evenly spaced from layer 1 to N - 3."""
    if count == 1:
        return (num_target_layers // 2,)
    return tuple(int(round(1 + i * (num_target_layers - 4) / (count - 1))) for i in range(count))


def _dflash_value(raw: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """z-lab `_draft_value`: `dflash_config` first, then the top level (some third-party repos use it)."""
    nested = raw.get("dflash_config") or {}
    if not isinstance(nested, Mapping):
        raise DFlashFormatError(f"dflash_config must be a JSON object, got {type(nested).__name__}")
    if name in nested and nested[name] is not None:
        return nested[name]
    value = raw.get(name)
    return default if value is None else value


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise DFlashFormatError(f"config field {name!r} must be a positive integer, got {value!r}")
    return value


def _required_int(raw: Mapping[str, Any], name: str) -> int:
    if name not in raw or raw[name] is None:
        raise DFlashFormatError(f"config.json lacks {name!r}, which a DFlash drafter needs")
    return _positive_int(name, raw[name])


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DFlashFormatError(f"config field {name!r} must be a number, got {value!r}")
    return float(value)


def _rope_theta(raw: Mapping[str, Any]) -> float:
    """`rope_theta` (transformers 4.x exports) or `rope_parameters.rope_theta` (5.x exports); default rope only."""
    parameters = raw.get("rope_parameters")
    scaling = raw.get("rope_scaling")
    for source in (parameters, scaling):
        if source is None:
            continue
        if not isinstance(source, Mapping):
            raise DFlashFormatError(f"rope_parameters / rope_scaling must be a JSON object, got {source!r}")
        rope_type = source.get("rope_type", source.get("type", "default"))
        if rope_type != "default":
            raise DFlashFormatError(f"rope type {rope_type!r} is not supported for DFlash drafters (only 'default')")
    theta = raw.get("rope_theta")
    if theta is None and isinstance(parameters, Mapping):
        theta = parameters.get("rope_theta")
    # Qwen3Config's default when neither field is present.
    return _number("rope_theta", 10000.0 if theta is None else theta)


def _layer_types(raw: Mapping[str, Any], num_layers: int) -> tuple[tuple[str, ...], int | None]:
    # Qwen3Config semantics, which is how z-lab's code reads these fields: the window only exists with
    # use_sliding_window, and without explicit layer_types the layers from max_window_layers on slide.
    window = raw.get("sliding_window") if raw.get("use_sliding_window", False) else None
    if window is not None:
        window = _positive_int("sliding_window", window)
    layer_types = raw.get("layer_types")
    if layer_types is None:
        max_window_layers = raw.get("max_window_layers", 28)
        types = tuple(
            SLIDING_ATTENTION if window is not None and i >= max_window_layers else FULL_ATTENTION
            for i in range(num_layers)
        )
        return types, window
    if not isinstance(layer_types, list) or len(layer_types) != num_layers:
        raise DFlashFormatError(f"layer_types must list one entry per draft layer ({num_layers}), got {layer_types!r}")
    unknown = sorted({t for t in layer_types if t not in (FULL_ATTENTION, SLIDING_ATTENTION)})
    if unknown:
        raise DFlashFormatError(f"unknown layer_types {unknown}; expected {FULL_ATTENTION!r} or {SLIDING_ATTENTION!r}")
    return tuple(layer_types), window


def _layer_ids(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not value
        or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in value)
    ):
        raise DFlashFormatError(f"target_layer_ids must be a non-empty list of layer indices >= 0, got {value!r}")
    return tuple(value)


def _optional_number(name: str, value: Any) -> float | None:
    return None if value is None else _number(name, value)


def parse_dflash_config(raw: Mapping[str, Any]) -> DFlashConfig:
    """Read z-lab's config.json (already parsed); raises `DFlashFormatError` naming the first bad field."""
    architectures = raw.get("architectures") or []
    if DFLASH2_ARCHITECTURE in architectures:
        raise DFlashFormatError(
            f"{DFLASH2_ARCHITECTURE} (DFlash 2: dynamic convolutions and a candidate selector) is not a DFlash v1 "
            f"drafter ({DFLASH_ARCHITECTURE}); it runs as method 'dflash2'"
        )
    if architectures and DFLASH_ARCHITECTURE not in architectures:
        raise DFlashFormatError(f"architectures {architectures!r} do not name {DFLASH_ARCHITECTURE}")
    hidden_size = _required_int(raw, "hidden_size")
    num_layers = _required_int(raw, "num_hidden_layers")
    num_heads = _required_int(raw, "num_attention_heads")
    num_kv_heads = _positive_int("num_key_value_heads", raw.get("num_key_value_heads", num_heads))
    if num_heads % num_kv_heads:
        raise DFlashFormatError(
            f"num_attention_heads ({num_heads}) must be a multiple of num_key_value_heads ({num_kv_heads})"
        )
    head_dim = _positive_int("head_dim", raw.get("head_dim") or hidden_size // num_heads)
    if head_dim % 2:
        raise DFlashFormatError(f"head_dim must be even for rotary embeddings, got {head_dim}")
    layer_types, window = _layer_types(raw, num_layers)
    is_causal = raw.get("is_causal")
    mask_token_id = _dflash_value(raw, "mask_token_id")
    if mask_token_id is not None and (isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int)):
        raise DFlashFormatError(f"mask_token_id must be an integer token id, got {mask_token_id!r}")
    num_target_layers = raw.get("num_target_layers")
    hidden_act = raw.get("hidden_act", "silu")
    from transformers.activations import ACT2FN

    if hidden_act not in ACT2FN:
        raise DFlashFormatError(f"hidden_act {hidden_act!r} is not an activation transformers knows")
    return DFlashConfig(
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=_required_int(raw, "intermediate_size"),
        rms_norm_eps=_number("rms_norm_eps", raw.get("rms_norm_eps", 1e-6)),
        rope_theta=_rope_theta(raw),
        attention_bias=bool(raw.get("attention_bias", False)),
        hidden_act=hidden_act,
        layer_types=layer_types,
        sliding_window=window,
        is_causal=None if is_causal is None else bool(is_causal),
        block_size=_positive_int("block_size", _dflash_value(raw, "block_size", 16)),
        mask_token_id=mask_token_id,
        target_layer_ids=_layer_ids(_dflash_value(raw, "target_layer_ids")),
        num_target_layers=None if num_target_layers is None else _positive_int("num_target_layers", num_target_layers),
        input_embedding_scale=_optional_number("input_embedding_scale", _dflash_value(raw, "input_embedding_scale")),
        output_multiplier=_number("output_multiplier", _dflash_value(raw, "output_multiplier", 1.0)),
        final_logit_softcapping=_optional_number(
            "final_logit_softcapping", _dflash_value(raw, "final_logit_softcapping")
        ),
    )


def expected_weight_shapes(config: DFlashConfig, num_fused_layers: int) -> dict[str, tuple[int, ...]]:
    """z-lab's tensor names and shapes (z-lab/dflash's model code); biases only with `attention_bias`."""
    hidden, head_dim = config.hidden_size, config.head_dim
    q_width = config.num_attention_heads * head_dim
    kv_width = config.num_key_value_heads * head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "fc.weight": (hidden, num_fused_layers * hidden),
        "hidden_norm.weight": (hidden,),
        "norm.weight": (hidden,),
    }
    for i in range(config.num_hidden_layers):
        prefix = f"layers.{i}"
        shapes |= {
            f"{prefix}.self_attn.q_proj.weight": (q_width, hidden),
            f"{prefix}.self_attn.k_proj.weight": (kv_width, hidden),
            f"{prefix}.self_attn.v_proj.weight": (kv_width, hidden),
            f"{prefix}.self_attn.o_proj.weight": (hidden, q_width),
            f"{prefix}.self_attn.q_norm.weight": (head_dim,),
            f"{prefix}.self_attn.k_norm.weight": (head_dim,),
            f"{prefix}.mlp.gate_proj.weight": (config.intermediate_size, hidden),
            f"{prefix}.mlp.up_proj.weight": (config.intermediate_size, hidden),
            f"{prefix}.mlp.down_proj.weight": (hidden, config.intermediate_size),
            f"{prefix}.input_layernorm.weight": (hidden,),
            f"{prefix}.post_attention_layernorm.weight": (hidden,),
        }
        if config.attention_bias:
            shapes |= {
                f"{prefix}.self_attn.q_proj.bias": (q_width,),
                f"{prefix}.self_attn.k_proj.bias": (kv_width,),
                f"{prefix}.self_attn.v_proj.bias": (kv_width,),
                f"{prefix}.self_attn.o_proj.bias": (hidden,),
            }
    return shapes


def layout_problems(
    tensors: Mapping[str, tuple[int, ...]], expected: Mapping[str, tuple[int, ...]]
) -> list[str]:
    """Human-readable differences between stored tensor shapes and the expected layout (empty = it fits)."""
    problems = [f"missing tensor {name} {list(shape)}" for name, shape in expected.items() if name not in tensors]
    problems += [f"unexpected tensor {name}" for name in tensors if name not in expected]
    problems += [
        f"tensor {name} has shape {list(tensors[name])}, expected {list(shape)}"
        for name, shape in expected.items()
        if name in tensors and tuple(tensors[name]) != shape
    ]
    return problems


@dataclass(frozen=True)
class TargetGeometry:
    """What the drafter must agree with in the target."""

    model_type: str
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    final_logit_softcapping: float | None

    @property
    def is_gemma(self) -> bool:
        return self.model_type.startswith("gemma")


def compatibility_problems(config: DFlashConfig, target: TargetGeometry, mask_token_id: int | None) -> list[str]:
    """Why this drafter cannot run on this target (empty = compatible)."""
    problems: list[str] = []
    if config.hidden_size != target.hidden_size:
        problems.append(
            f"drafter hidden_size {config.hidden_size} differs from the target's {target.hidden_size}; a DFlash "
            "drafter reads the target's hidden states and embeddings, so they must be equal"
        )
    if config.num_target_layers is not None and config.num_target_layers != target.num_hidden_layers:
        problems.append(
            f"drafter was trained for a target with {config.num_target_layers} layers (num_target_layers), "
            f"the target has {target.num_hidden_layers}"
        )
    layer_ids = config.layer_ids_for(target.num_hidden_layers)
    out_of_range = [i for i in layer_ids if i >= target.num_hidden_layers]
    if out_of_range:
        problems.append(
            f"target_layer_ids {list(out_of_range)} do not exist in a target with {target.num_hidden_layers} layers"
        )
    if mask_token_id is None:
        problems.append(
            f"the drafter names no mask_token_id (dflash_config.mask_token_id) and the target tokenizer has no "
            f"{MASK_TOKEN_TEXT} token"
        )
    elif not 0 <= mask_token_id < target.vocab_size:
        problems.append(f"mask_token_id {mask_token_id} is outside the target's vocabulary ({target.vocab_size})")
    return problems
