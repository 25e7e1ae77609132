"""The EAGLE-3 draft model in torch (`verifier.methods.eagle3.config` describes the layouts it loads from).

The forward, in words (EAGLE's `cnets.py`, speculators' `Eagle3FirstLayerMixin`):
- a draft row pairs a feature with the embedding of the token one position later: (target feature at position i,
  token at i + 1), which predicts the token at i + 2. The first feature of a row is the fused target states
  (low/mid/high layers concatenated, width k * H_target) passed through `fc` (after the optional norms); later
  chained steps feed the drafter's own output state back (width H, no `fc`);
- the first layer splits `[embed ; hidden]`: the embedding through `input_layernorm`, the hidden through
  `hidden_norm`, concatenated (2H) into q/k/v; the residual is the hidden before (or, with
  `norm_before_residual`, after) `hidden_norm`; then a standard MLP block. Further layers are plain decoder layers;
- causal attention over every earlier row (a KV cache over committed rows, draft rows dropped after each round);
  RoPE at the row's position: i for yuhuili (positions start at 0), i + 1 for speculators (they count the token);
- logits = lm_head(norm(h)) over the draft vocabulary; draft id j is target id j + d2t[j].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from verifier.methods.dflash.model import RMSNorm
from verifier.methods.eagle3.config import Eagle3Config


def rotary_embedding(config: Eagle3Config) -> nn.Module:
    """transformers' Llama rotary embedding from the layer config (default, llama3, linear, yarn ... rope)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    return LlamaRotaryEmbedding(config=config.layer_config)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


class Eagle3Attention(nn.Module):
    def __init__(self, config: Eagle3Config, input_width: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(input_width, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(input_width, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(input_width, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=bias)
        if config.has_qk_norm:
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        past: tuple[torch.Tensor, torch.Tensor] | None,
        mask: torch.Tensor | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        batch, rows, _ = x.shape
        q = self.q_proj(x).view(batch, rows, self.heads, self.head_dim)
        k = self.k_proj(x).view(batch, rows, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(batch, rows, self.kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope
        q = _apply_rope(q.transpose(1, 2), cos, sin)
        k = _apply_rope(k.transpose(1, 2), cos, sin)
        v = v.transpose(1, 2)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        if mask is None:
            # Row r (of the new rows) sees every cached row and the new rows up to itself.
            keys = k.shape[2]
            mask = torch.ones(rows, keys, dtype=torch.bool, device=x.device).tril(keys - rows)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.heads != self.kv_heads)
        return self.o_proj(out.transpose(1, 2).reshape(batch, rows, -1)), (k, v)


class Eagle3MLP(nn.Module):
    def __init__(self, config: Eagle3Config) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.act = ACT2FN[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class Eagle3Layer(nn.Module):
    def __init__(self, config: Eagle3Config, index: int) -> None:
        super().__init__()
        self.first = index == 0
        self.norm_before_residual = config.norm_before_residual
        hidden = config.hidden_size
        self.self_attn = Eagle3Attention(config, 2 * hidden if self.first else hidden)
        self.mlp = Eagle3MLP(config)
        self.input_layernorm = RMSNorm(hidden, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(hidden, config.rms_norm_eps)
        if self.first:
            self.hidden_norm = RMSNorm(hidden, config.rms_norm_eps)

    def forward(
        self,
        hidden: torch.Tensor,
        embeds: torch.Tensor | None,
        rope: tuple[torch.Tensor, torch.Tensor],
        past: tuple[torch.Tensor, torch.Tensor] | None,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        if self.first:
            assert embeds is not None
            normed = self.hidden_norm(hidden)
            residual = normed if self.norm_before_residual else hidden
            attn_input = torch.cat([self.input_layernorm(embeds), normed], dim=-1)
        else:
            residual, attn_input = hidden, self.input_layernorm(hidden)
        attended, kv = self.self_attn(attn_input, rope, past, mask)
        hidden = residual + attended
        return hidden + self.mlp(self.post_attention_layernorm(hidden)), kv


@dataclass
class DraftCache:
    """Per-layer K/V [1, kv_heads, rows, head_dim] of the rows fed so far."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    length: int = 0

    def crop(self, length: int) -> None:
        self.layers = [(k[:, :, :length], v[:, :, :length]) for k, v in self.layers]
        self.length = min(self.length, length)


class Eagle3DraftModel(nn.Module):
    """The EAGLE-3 head; `state_dict()` keys are the canonical (speculators) tensor names."""

    def __init__(self, config: Eagle3Config, num_fused: int, *, own_embedding: bool, own_lm_head: bool, fc_bias: bool) -> None:
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        if own_embedding:
            self.embed_tokens = nn.Embedding(config.vocab_size, hidden)
        if own_lm_head:
            self.lm_head = nn.Linear(hidden, config.draft_vocab_size, bias=False)
        if config.draft_vocab_size != config.vocab_size:
            self.register_buffer("d2t", torch.zeros(config.draft_vocab_size, dtype=torch.long))
        if config.norm_before_fc:
            self.input_norm = RMSNorm(num_fused * config.target_hidden_size, config.rms_norm_eps)
        if config.fc_norm:
            self.fc_norm = nn.ModuleList(RMSNorm(config.target_hidden_size, config.rms_norm_eps) for _ in range(num_fused))
        self.fc = nn.Linear(num_fused * config.target_hidden_size, hidden, bias=fc_bias)
        self.layers = nn.ModuleList(Eagle3Layer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(hidden, config.rms_norm_eps)
        self.rotary = rotary_embedding(config)

    def project_features(self, fused: torch.Tensor) -> torch.Tensor:
        """Fused target states [1, T, k * H_t] -> the first layer's hidden input [1, T, H]."""
        if self.config.norm_before_fc:
            fused = self.input_norm(fused)
        if self.config.fc_norm:
            chunks = fused.chunk(len(self.fc_norm), dim=-1)
            fused = torch.cat([norm(chunk) for norm, chunk in zip(self.fc_norm, chunks, strict=True)], dim=-1)
        return self.fc(fused)

    def forward(
        self,
        hidden: torch.Tensor,
        embeds: torch.Tensor,
        positions: torch.Tensor,
        cache: DraftCache,
        mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(final-normed states [b, T, H], states to feed back [b, T, H]) for rows appended after the cache.

        `hidden` is the first layer's hidden input (`project_features` of target states, or a state fed back);
        `mask` [T, cached + T] (bool) replaces the causal rule; training uses it for training-time test.
        """
        cos, sin = self.rotary(hidden, (positions + self.config.position_offset)[None])
        rope = (cos[:, None].to(hidden.dtype), sin[:, None].to(hidden.dtype))
        for index, layer in enumerate(self.layers):
            past = cache.layers[index] if index < len(cache.layers) else None
            hidden, kv = layer(hidden, embeds, rope, past, mask)
            if index < len(cache.layers):
                cache.layers[index] = kv
            else:
                cache.layers.append(kv)
        cache.length += int(positions.shape[0])
        normed = self.norm(hidden)
        # speculators' norm_output feeds the normalised state back; EAGLE feeds the raw one.
        return normed, (normed if self.config.norm_output else hidden)
