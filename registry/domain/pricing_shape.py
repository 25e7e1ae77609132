"""What a network reads per forward, from its config: parameters held and streamed, MoE experts, and KV cache
layers; and the (target, drafter) pair shape that pricing.py prices. Pure arithmetic, no I/O (docs/pricing.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from registry.domain.drafter_facts import DFLASH_FAMILY
from registry.errors import UserError

# Methods whose drafting step is one forward over the whole block; the rest draft one token per forward.
BLOCK_METHODS = DFLASH_FAMILY


class PricingError(UserError, ValueError):
    """Inputs that cannot be priced (no acceptance, unknown quantization, nonsense sizes)."""


@dataclass(frozen=True)
class KvLayers:
    """A group of layers that each keep bytes_per_token of KV per token (at 2 bytes per element), capped at
    `window` tokens for sliding-window layers."""

    count: int
    bytes_per_token: float  # per layer
    window: int | None = None


@dataclass(frozen=True)
class NetworkShape:
    """One network's cost facts: parameters held, parameters read per token, and its KV cache."""

    parameters: int  # held in memory
    streamed_parameters: int  # read by a one-token forward (an untied input embedding is a lookup, not read)
    expert_parameters: int = 0  # routed-expert part of streamed_parameters (MoE); 0 for dense models
    experts: int = 0
    experts_per_token: int = 0
    kv: tuple[KvLayers, ...] = ()
    notes: tuple[str, ...] = ()

    def kv_bytes(self, context: int, bytes_per_element: float = 2.0) -> float:
        scale = bytes_per_element / 2.0
        return sum(g.count * g.bytes_per_token * scale * (min(context, g.window) if g.window else context)
                   for g in self.kv)

    def streamed_for(self, tokens: int) -> float:
        """Parameters a forward over `tokens` tokens reads: all dense ones, and for a MoE the routed experts the
        tokens hit (expected distinct experts under uniform routing: E · (1 − (1 − k/E)^n))."""
        if not self.experts or not self.expert_parameters:
            return float(self.streamed_parameters)
        hit = self.experts * (1 - (1 - self.experts_per_token / self.experts) ** tokens)
        return self.streamed_parameters - self.expert_parameters + self.expert_parameters * hit / self.experts


def _section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    nested = config.get("text_config")
    return {**config, **nested} if isinstance(nested, Mapping) else config


def _int(config: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def kv_layers(config: Mapping[str, Any]) -> tuple[tuple[KvLayers, ...], tuple[str, ...]]:
    """KV bytes per token per layer from a config, with notes for the rough cases.

    MLA (kv_lora_rank): one compressed latent + the RoPE key per token and layer. Linear-attention / hybrid
    layers (layer_types 'linear_attention', full_attention_interval): only the full-attention layers keep a KV
    cache; the recurrent state is fixed-size and left out. Sliding-window layers keep at most `sliding_window`.
    """
    c = _section(config)
    layers = _int(c, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(c, "num_attention_heads", "n_head")
    hidden = _int(c, "hidden_size", "n_embd", "d_model")
    if layers is None or heads is None:
        return (), ("KV cache unknown (no layer or head count in the config): counted as 0",)
    notes: list[str] = []
    kv_lora = _int(c, "kv_lora_rank")
    if kv_lora is not None:
        rope = _int(c, "qk_rope_head_dim") or 64
        notes.append("MLA: KV = compressed latent + RoPE key per layer (rough)")
        return (KvLayers(layers, (kv_lora + rope) * 2.0),), tuple(notes)
    kv_heads = _int(c, "num_key_value_heads") or heads
    head_dim = _int(c, "head_dim") or (hidden // heads if hidden else None)
    if head_dim is None:
        return (), ("KV cache unknown (no head_dim or hidden_size): counted as 0",)
    per_layer = 2.0 * kv_heads * head_dim * 2.0
    types = c.get("layer_types")
    window = _int(c, "sliding_window")
    if isinstance(types, list) and types and all(isinstance(t, str) for t in types):
        full = sum(1 for t in types if t in ("full_attention", "attention", "global"))
        sliding = sum(1 for t in types if "sliding" in t or t == "local")
        linear = len(types) - full - sliding
        groups = [KvLayers(full, per_layer)] if full else []
        if sliding:
            groups.append(KvLayers(sliding, per_layer, window))
        if linear:
            notes.append(f"{linear} linear-attention layers keep a fixed-size state, not a KV cache (left out; rough)")
        if sliding and window is None:
            notes.append("sliding layers without sliding_window counted at full context")
        return tuple(groups), tuple(notes)
    interval = _int(c, "full_attention_interval")
    if interval is not None and interval > 1:
        full = layers // interval
        notes.append(f"hybrid: {full} of {layers} layers keep a KV cache; linear-attention state left out (rough)")
        return (KvLayers(full, per_layer),), tuple(notes)
    return (KvLayers(layers, per_layer),), tuple(notes)


def shape_from_config(
    config: Mapping[str, Any], *, parameters: int | None = None, extra_parameters: int = 0
) -> NetworkShape | None:
    """A network's shape from its config; `parameters` (counted or from weight bytes) overrides the estimate.

    The estimate counts a gated-MLP decoder: per layer q/k/v/o projections and 3·hidden·intermediate (or the
    routed and shared experts), plus embeddings (and an untied head). `extra_parameters` adds what the config
    does not describe as layers (a drafter's fusion `fc`).
    """
    c = _section(config)
    hidden = _int(c, "hidden_size", "n_embd", "d_model")
    layers = _int(c, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(c, "num_attention_heads", "n_head")
    vocab = _int(c, "vocab_size") or 0
    kv, notes = kv_layers(config)
    if hidden is None or layers is None or heads is None:
        if parameters is None:
            return None
        return NetworkShape(parameters, parameters, kv=kv, notes=notes + ("read per step = all parameters",))
    kv_heads = _int(c, "num_key_value_heads") or heads
    head_dim = _int(c, "head_dim") or hidden // heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    experts = _int(c, "num_experts", "n_routed_experts", "num_local_experts") or 0
    active = _int(c, "num_experts_per_tok", "num_experts_per_token", "moe_topk") or 0
    intermediate = _int(c, "intermediate_size") or 4 * hidden
    expert_size = 3 * hidden * (_int(c, "moe_intermediate_size") or intermediate)
    if experts and active:
        shared = (_int(c, "n_shared_experts", "num_shared_experts") or 0) * expert_size
        dense_first = min(_int(c, "first_k_dense_replace") or 0, layers)
        mlp_total = dense_first * 3 * hidden * intermediate + (layers - dense_first) * (experts * expert_size + shared)
        expert_total = (layers - dense_first) * experts * expert_size
        notes = notes + (f"MoE: {active} of {experts} experts per token (a verify pass hits more)",)
    else:
        mlp_total, expert_total, experts, active = layers * 3 * hidden * intermediate, 0, 0, 0
    tied = c.get("tie_word_embeddings")
    embedding = vocab * hidden
    estimate = layers * attention + mlp_total + embedding * (1 if tied is not False else 2) + extra_parameters
    held = parameters if parameters is not None else estimate
    # An untied input embedding is a row lookup; the head (tied or not) is read in full every token.
    streamed = held - (embedding if tied is False else 0)
    expert_share = round(expert_total * held / estimate) if estimate else 0
    return NetworkShape(held, max(streamed, 0), expert_share, experts, active, kv, notes)


def pair_shape(target_config: Mapping[str, Any] | None, drafter_config: Mapping[str, Any] | None, method: str | None,
               *, target_parameters: int | None = None, drafter_parameters: int | None = None) -> PairShape:
    """Target and drafter shapes. DFlash-family drafters hold no embedding or head (they borrow the target's,
    so a drafting forward also reads the target's head) and add a fusion `fc` of (fused layers × hidden) × hidden;
    EAGLE-3 adds its 3·hidden → hidden `fc`."""
    target = shape_from_config(target_config or {}, parameters=target_parameters)
    if target is None:
        raise PricingError("the target's size is unknown: no parameter count, weight bytes or usable config")
    t = _section(target_config or {})
    head = (_int(t, "vocab_size") or 0) * (_int(t, "hidden_size") or 0)
    d = dict(_section(drafter_config or {}))
    hidden = _int(d, "hidden_size") or 0
    borrowed = 0
    extra = 0
    if method in BLOCK_METHODS:
        dflash = d.get("dflash_config") if isinstance(d.get("dflash_config"), Mapping) else {}
        fused = dflash.get("target_layer_ids") or d.get("target_layer_ids") or []
        extra = len(fused) * hidden * hidden if isinstance(fused, list) else 0
        d["vocab_size"] = 0
        borrowed = head
    elif method == "eagle3":
        extra = 3 * hidden * hidden
    drafter = shape_from_config(d, parameters=drafter_parameters, extra_parameters=extra)
    if drafter is None:
        raise PricingError("the drafter's size is unknown: no weight bytes or usable config")
    return PairShape(target=target, drafter=drafter, method=method, borrowed_parameters=borrowed)


@dataclass(frozen=True)
class PairShape:
    target: NetworkShape
    drafter: NetworkShape
    method: str | None
    # Target parameters the drafter's forward also reads: the target's head for DFlash-family drafters, which
    # have no head of their own.
    borrowed_parameters: int = 0
