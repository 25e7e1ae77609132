"""The DFlash v1 draft model (z-lab layout) in torch: block embeddings and logits, attention with its context
cache, decoder layers.

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
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from verifier.methods.dflash.config import DFlashConfig, TargetGeometry


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

    def forward(
        self,
        hidden: torch.Tensor,
        context: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        past: LayerKV | None,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, LayerKV]:
        """The block's hidden states after this layer, and the layer's context K/V to cache."""
        attended, layer_kv = self.self_attn(self.input_layernorm(hidden), context, rope, past, mask)
        hidden = hidden + attended
        return hidden + self.mlp(self.post_attention_layernorm(hidden)), layer_kv


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
            hidden, layer_kv = layer(hidden, context, rope, past, mask)
            if cache is not None:
                if past is None:
                    cache.layers.append(layer_kv)
                else:
                    cache.layers[index] = layer_kv
        if cache is not None:
            cache.length = past_length + int(context_positions.shape[0])
        return self.norm(hidden)
