"""DFlash v1 drafters (z-lab layout): the draft model, its config, and the proposer the decode loop drives.

The weights load from the drafter's own `model.safetensors` with z-lab's published tensor names (see
`expected_weight_shapes`); the publisher's `dflash.py` (`auto_map`) is never run. The drafter borrows the target's
embedding table and LM head.

One drafting round (z-lab `dflash_generate`):
- context features = concat of the target's hidden states at `target_layer_ids` for newly committed positions,
  then `fc` and `hidden_norm`;
- block = target embeddings of `[pending token, mask x (B - 1)]` at positions end .. end + B - 1;
- every draft layer: queries from the block, keys/values = its own k/v projections of all committed context
  followed by the block's; q/k per-head RMSNorm, then RoPE by absolute position; full-attention layers are
  non-causal, sliding layers causal within their window (z-lab's rule, overridable by `is_causal`);
- context K/V stays cached across rounds, the block's K/V is dropped;
- final norm -> target LM head -> the B - 1 drafts after the anchor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from verifier.loading import LoadError, read_config, weight_files
from verifier.proposer import Proposal, TargetOutput

if TYPE_CHECKING:
    from verifier.engines.pytorch import RunSettings
    from verifier.loading import LoadedTarget

DFLASH_ARCHITECTURE = "DFlashDraftModel"
DFLASH2_ARCHITECTURE = "DFlash2DraftModel"
FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
# What users added to the target tokenizer before z-lab put `mask_token_id` into the config (2026-02-05).
MASK_TOKEN_TEXT = "<|MASK|>"


class DFlashFormatError(LoadError):
    """A drafter folder does not follow z-lab's DFlash v1 layout; the message names the offending field or tensor."""


# --------------------------------------------------------------------------------------------------------------
# Config (pure)
# --------------------------------------------------------------------------------------------------------------


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
            f"{DFLASH2_ARCHITECTURE} (DFlash 2: dynamic convolutions and a candidate selector) is not supported; "
            f"this verifier runs DFlash v1 drafters ({DFLASH_ARCHITECTURE})"
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
    """z-lab's tensor names and shapes (dflash-format.md); biases only with `attention_bias`."""
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


@dataclass(frozen=True)
class OutputNumerics:
    """How block embeddings and draft logits are scaled (Gemma family numerics, else identity)."""

    embedding_scale: float
    output_multiplier: float
    logit_softcap: float | None


def output_numerics(config: DFlashConfig, target: TargetGeometry) -> OutputNumerics:
    # Gemma targets scale their embeddings by sqrt(H) inside the model; the drafter embeds with the raw table.
    default_scale = math.sqrt(target.hidden_size) if target.is_gemma else 1.0
    softcap = config.final_logit_softcapping
    if softcap is None and target.is_gemma:
        softcap = target.final_logit_softcapping
    return OutputNumerics(
        embedding_scale=default_scale if config.input_embedding_scale is None else config.input_embedding_scale,
        output_multiplier=config.output_multiplier,
        logit_softcap=softcap if softcap is not None and softcap > 0 else None,
    )


def embed_block(token_ids: torch.Tensor, embedding_weight: torch.Tensor, numerics: OutputNumerics) -> torch.Tensor:
    """The drafter's view of block tokens: the target's embedding table times the target's embedding scale.

    The one place block embeddings are made, for inference and for the tiny trainer alike: a drafter trained on
    differently scaled embeddings than it is run with (Gemma's sqrt(H)) drafts noise.
    """
    return F.embedding(token_ids, embedding_weight) * numerics.embedding_scale


def block_logits(hidden: torch.Tensor, lm_head: nn.Module, numerics: OutputNumerics) -> torch.Tensor:
    """Logits from drafted hidden states through the target's LM head, with the output multiplier and soft-capping
    (inference and the tiny trainer alike)."""
    logits = lm_head(hidden) * numerics.output_multiplier
    if numerics.logit_softcap is not None:
        logits = torch.tanh(logits / numerics.logit_softcap) * numerics.logit_softcap
    return logits


# --------------------------------------------------------------------------------------------------------------
# The draft model
# --------------------------------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Qwen3RMSNorm numerics: normalise in float32, scale in the input dtype.
        normalised = F.rms_norm(x.float(), (x.shape[-1],), eps=self.eps)
        return self.weight * normalised.to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [b, heads, n, d]; cos/sin [n, d]."""
    return x * cos + _rotate_half(x) * sin


@dataclass
class LayerKV:
    """Cached keys/values of committed context positions for one layer: [b, kv_heads, T, d] (after norm + RoPE)."""

    keys: torch.Tensor
    values: torch.Tensor


@dataclass
class ContextCache:
    """The drafter's cache: context K/V of every committed position, never the block's."""

    layers: list[LayerKV] = field(default_factory=list)  # one per draft layer once the first block ran
    length: int = 0


def attention_visibility(
    query_positions: torch.Tensor, key_positions: torch.Tensor, *, causal: bool, window: int | None
) -> torch.Tensor | None:
    """Boolean [Q, K] of which keys each query sees (z-lab `_attention_mask`); None = everything."""
    if not causal and window is None:
        return None
    q = query_positions[:, None]
    k = key_positions[None, :]
    visible = torch.ones(q.shape[0], k.shape[1], dtype=torch.bool, device=query_positions.device)
    if causal:
        visible &= k <= q
    if window is not None:
        visible &= q - k < window
        if not causal:
            visible &= k - q < window
    return visible


class DFlashAttention(nn.Module):
    def __init__(self, config: DFlashConfig, layer_index: int) -> None:
        super().__init__()
        hidden, self.head_dim = config.hidden_size, config.head_dim
        self.num_heads, self.num_kv_heads = config.num_attention_heads, config.num_key_value_heads
        bias = config.attention_bias
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.causal = config.is_causal_layer(layer_index)
        self.window = config.window_of_layer(layer_index)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, -1, self.head_dim).transpose(1, 2)

    def forward(
        self,
        block: torch.Tensor,
        context: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        past: LayerKV | None,
        visibility: torch.Tensor | None,
    ) -> tuple[torch.Tensor, LayerKV]:
        """block [b, Q, H] gives the queries; context [b, T, H] = new committed rows; `rope` covers the T + Q
        positions. Returns the output and the K/V of every committed row (past + new) for the cache."""
        cos, sin = rope
        query_length = block.shape[1]
        # z-lab projects context and block separately and concatenates; one projection of both is the same math.
        kv_input = torch.cat([context, block], dim=1)
        keys = _apply_rope(self.k_norm(self._heads(self.k_proj(kv_input))), cos, sin)
        values = self._heads(self.v_proj(kv_input))
        queries = _apply_rope(self.q_norm(self._heads(self.q_proj(block))), cos[-query_length:], sin[-query_length:])
        if past is not None:
            keys = torch.cat([past.keys, keys], dim=2)
            values = torch.cat([past.values, values], dim=2)
        output = F.scaled_dot_product_attention(
            queries,
            keys,
            values,
            attn_mask=visibility,
            scale=self.head_dim**-0.5,
            enable_gqa=self.num_heads != self.num_kv_heads,
        )
        output = output.transpose(1, 2).reshape(block.shape[0], query_length, -1)
        committed = keys.shape[2] - query_length  # the block's own K/V is dropped here
        return self.o_proj(output), LayerKV(keys[:, :, :committed], values[:, :, :committed])


class DFlashMLP(nn.Module):
    def __init__(self, config: DFlashConfig) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DFlashDecoderLayer(nn.Module):
    def __init__(self, config: DFlashConfig, layer_index: int) -> None:
        super().__init__()
        self.self_attn = DFlashAttention(config, layer_index)
        self.mlp = DFlashMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)


def rope_inv_freq(config: DFlashConfig) -> torch.Tensor:
    exponents = torch.arange(0, config.head_dim, 2, dtype=torch.float32) / config.head_dim
    return 1.0 / (config.rope_theta**exponents)


class DFlashDraftModel(nn.Module):
    """z-lab's DFlash v1 draft model; `state_dict()` keys are exactly the published tensor names."""

    def __init__(self, config: DFlashConfig, num_fused_layers: int) -> None:
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        self.fc = nn.Linear(num_fused_layers * hidden, hidden, bias=False)
        self.hidden_norm = RMSNorm(hidden, config.rms_norm_eps)
        self.layers = nn.ModuleList(DFlashDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(hidden, config.rms_norm_eps)
        self._rope_table: tuple[torch.Tensor, torch.Tensor] | None = None

    def rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin [n, d] for absolute `positions` [n], from a float32 table that grows by doubling."""
        needed = int(positions.max()) + 1
        if self._rope_table is None or self._rope_table[0].shape[0] < needed:
            length = max(needed, 2 * (self._rope_table[0].shape[0] if self._rope_table is not None else 256))
            inv_freq = rope_inv_freq(self.config).to(positions.device)
            freqs = torch.arange(length, device=positions.device, dtype=torch.float32)[:, None] * inv_freq
            angles = torch.cat([freqs, freqs], dim=-1)
            self._rope_table = (angles.cos(), angles.sin())
        cos, sin = self._rope_table
        return cos[positions].to(dtype), sin[positions].to(dtype)

    def forward(
        self,
        block_embeds: torch.Tensor,
        block_positions: torch.Tensor,
        context_features: torch.Tensor,
        context_positions: torch.Tensor,
        cache: ContextCache | None = None,
        visibility: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Drafted hidden states [b, Q, H] (after the final norm) for the block.

        block_embeds [b, Q, H] at `block_positions` [Q]; context_features [b, T, k*H] = the target's fused hidden
        states of new committed rows at `context_positions` [T]. With `cache`, earlier context K/V is attended to
        and the new rows are appended to it. `visibility` [Q, T_all + Q] (bool) replaces the layer masks; training
        uses it to pack several blocks into one pass.
        """
        # First, while no draft work is queued: growing the RoPE table reads a position on the host.
        rope = self.rope(torch.cat([context_positions, block_positions]), block_embeds.dtype)
        context = self.hidden_norm(self.fc(context_features))
        past_length = cache.length if cache is not None else 0
        key_positions = torch.cat(
            [torch.arange(past_length, device=block_positions.device), context_positions, block_positions]
        )
        hidden = block_embeds
        for index, layer in enumerate(self.layers):
            attention = layer.self_attn
            mask = visibility
            if mask is None:
                mask = attention_visibility(
                    block_positions, key_positions, causal=attention.causal, window=attention.window
                )
            past = cache.layers[index] if cache is not None and index < len(cache.layers) else None
            attended, layer_kv = attention(layer.input_layernorm(hidden), context, rope, past, mask)
            hidden = hidden + attended
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
            if cache is not None:
                if past is None:
                    cache.layers.append(layer_kv)
                else:
                    cache.layers[index] = layer_kv
        if cache is not None:
            cache.length = past_length + int(context_positions.shape[0])
        return self.norm(hidden)


# --------------------------------------------------------------------------------------------------------------
# Loading and the proposer
# --------------------------------------------------------------------------------------------------------------


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
    tensors = read_drafter_weights(drafter_dir)
    problems = layout_problems(
        {name: tuple(t.shape) for name, t in tensors.items()}, expected_weight_shapes(config, num_fused_layers)
    )
    if problems:
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise DFlashFormatError(f"{drafter_dir}: the weights do not follow the DFlash v1 layout: {shown}")
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
        """Logits [draft_length, V] after the anchor; moves the pending context into the cache.

        The whole trained block is drafted even when fewer tokens are proposed: attention inside it is
        non-causal, so a shorter block would change every position.
        """
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
        return block_logits(hidden[0, 1 : 1 + self.draft_length], self.lm_head, self.numerics)

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        logits = self.draft_logits().float()
        if temperature <= 0:
            return Proposal(tokens=logits.argmax(dim=-1))
        q_probs = torch.softmax(logits / temperature, dim=-1)
        tokens = torch.multinomial(q_probs, 1, generator=generator)[:, 0]
        return Proposal(tokens=tokens, q_probs=q_probs)


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings) -> DFlashProposer:
    """A DFlash proposer for `target`; raises `IncompatiblePair` when the drafter cannot serve this target."""
    from verifier.decode import rollback_problem
    from verifier.engines.pytorch import IncompatiblePair

    drafter_dir = Path(drafter_dir)
    config = parse_dflash_config(read_config(drafter_dir))
    geometry = target_geometry(target.model)
    mask_token_id = resolve_mask_token_id(config, target.tokenizer)
    problems = compatibility_problems(config, geometry, mask_token_id)
    rollback = rollback_problem(target.model)
    if rollback is not None:
        problems.append(f"target: {rollback}")
    if problems:
        raise IncompatiblePair(problems)
    assert mask_token_id is not None  # compatibility_problems reports a missing mask id
    layer_ids = config.layer_ids_for(geometry.num_hidden_layers)
    target_parameter = next(target.model.parameters())
    draft_model = load_draft_model(
        drafter_dir, config, len(layer_ids), device=target_parameter.device, dtype=target_parameter.dtype
    )
    default_length = config.block_size - 1
    draft_length = default_length if settings.draft_length is None else min(settings.draft_length, default_length)
    return DFlashProposer(
        draft_model,
        target.model,
        layer_ids=layer_ids,
        mask_token_id=mask_token_id,
        numerics=output_numerics(config, geometry),
        draft_length=draft_length,
    )


# --------------------------------------------------------------------------------------------------------------
# transformers' own implementation of the same layout (reference and benchmark counterpart)
# --------------------------------------------------------------------------------------------------------------

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
