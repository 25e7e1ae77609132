"""EAGLE-3 drafters in their two published layouts, and the proposer the decode loop drives.

Layouts (detected from config.json and the safetensors tensor names, never from code in the folder):
- "eagle3": yuhuili's EAGLE3 repos and SpecForge exports (`LlamaForCausalLMEagle3`): one decoder layer stored as
  `midlayer.*`, `fc`, `norm`, a reduced-vocabulary `lm_head`, `d2t`/`t2d`; the token embedding is the target's
  unless the folder carries `embed_tokens.weight`. Fused layer ids (`eagle_config.eagle_aux_hidden_state_layer_ids`)
  name decoder layers whose OUTPUT is read.
- "speculators": vLLM speculators `Eagle3Speculator`: `layers.{i}.*` (Llama or Qwen3 decoder layers, the first with
  a doubled input), optional `input_norm` / `fc_norm.{i}`, `norm_output`, `norm_before_residual`; the geometry sits
  in `transformer_layer_config`; `eagle_aux_hidden_state_layer_ids` are hidden-state indices (the INPUT of that
  layer, i.e. the output of the layer before).
- "deepspec": DeepSeek's DeepSpec `Qwen3Eagle3Model` (`deepseek-ai/eagle3_qwen3_*`): the target's Qwen3 config with
  `target_layer_ids` (five layer OUTPUT ids), `ttt_length` (the drafts per round its evaluator proposes) and one
  decoder layer; the canonical tensor names (`layers.0.*` with q/k norms and `hidden_norm`, `fc` without bias,
  `norm`) plus its own full-vocabulary `embed_tokens` and `lm_head` (no `d2t`). Positions start at 0, the raw state
  is fed back (DeepSpec's `Qwen3Eagle3Evaluator`).

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

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from verifier.loading import LoadError, read_config
from verifier.methods.dflash import RMSNorm, layout_problems, read_drafter_weights
from verifier.proposer import Proposal, TargetOutput

if TYPE_CHECKING:
    from verifier.engines.pytorch import RunSettings
    from verifier.loading import LoadedTarget

EAGLE3_ARCHITECTURE = "LlamaForCausalLMEagle3"
SPECULATORS_ARCHITECTURE = "Eagle3Speculator"
YUHUILI_LAYOUT = "eagle3"
SPECULATORS_LAYOUT = "speculators"
DEEPSPEC_LAYOUT = "deepspec"
DEEPSPEC_ARCHITECTURE = "Qwen3Eagle3Model"
# DeepSpec's Gemma-4 head is a different decoder layer; named so it is refused with the reason, not mis-read.
DEEPSPEC_GEMMA4_ARCHITECTURE = "Gemma4Eagle3Model"
DEFAULT_DRAFT_LENGTH = 5  # EAGLE's default chain depth
LAYER_TYPES_WITH_QK_NORM = frozenset({"qwen3"})


class Eagle3FormatError(LoadError):
    """A drafter folder is not an EAGLE-3 drafter in a known layout; the message names what did not match."""


# --------------------------------------------------------------------------------------------------------------
# Config (pure)
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Eagle3Config:
    layout: str  # YUHUILI_LAYOUT, SPECULATORS_LAYOUT or DEEPSPEC_LAYOUT
    layer_type: str  # "llama" or "qwen3" (q/k norms)
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    hidden_act: str
    attention_bias: bool
    vocab_size: int  # the target vocabulary the drafter was made for
    draft_vocab_size: int
    target_hidden_size: int
    # Entries of the target's hidden-state tuple that are fused (0 = embeddings); None = EAGLE-3's default.
    aux_hidden_state_indices: tuple[int, ...] | None
    norm_before_residual: bool
    norm_before_fc: bool
    fc_norm: bool
    norm_output: bool
    position_offset: int
    speculative_tokens: int | None
    layer_config: Any = field(compare=False, repr=False)  # the layer's transformers config (rope parameters)

    @property
    def has_qk_norm(self) -> bool:
        return self.layer_type in LAYER_TYPES_WITH_QK_NORM

    def hidden_state_indices(self, target_layers: int) -> tuple[int, ...]:
        """Which hidden states are fused: explicit ids, else EAGLE-3's inputs of layers 2, N/2 and N-3."""
        if self.aux_hidden_state_indices is not None:
            return self.aux_hidden_state_indices
        return (2, target_layers // 2, target_layers - 3)


def _ids(value: Any, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or any(isinstance(i, bool) or not isinstance(i, int) for i in value):
        raise Eagle3FormatError(f"{name} must be a non-empty list of integers, got {value!r}")
    return tuple(value)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise Eagle3FormatError(f"config field {name!r} must be a positive integer, got {value!r}")
    return value


def detect_layout(raw: Mapping[str, Any]) -> str:
    """The layout a config declares; raises for configs that are not EAGLE-3."""
    speculators_type = raw.get("speculators_model_type")
    if speculators_type is not None:
        if speculators_type != "eagle3":
            raise Eagle3FormatError(f"speculators_model_type {speculators_type!r} is not 'eagle3'")
        return SPECULATORS_LAYOUT
    architectures = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
    if DEEPSPEC_GEMMA4_ARCHITECTURE in architectures:
        raise Eagle3FormatError(
            f"DeepSpec's Gemma-4 EAGLE-3 head ({DEEPSPEC_GEMMA4_ARCHITECTURE}: Gemma-4 decoder layers with a v-norm, "
            "pre/post feed-forward norms, scaled embeddings and logit soft-capping) has no loader yet"
        )
    if DEEPSPEC_ARCHITECTURE in architectures:
        return DEEPSPEC_LAYOUT
    return YUHUILI_LAYOUT


def _layer_config(layer_type: str, fields: Mapping[str, Any]) -> Any:
    """The decoder layer's transformers config, read natively: speculators saves only the fields that differ from
    the class defaults (`to_diff_dict`), so the defaults must come from the same class."""
    from transformers import LlamaConfig, Qwen3Config

    classes = {"llama": LlamaConfig, "qwen3": Qwen3Config}
    if layer_type not in classes:
        raise Eagle3FormatError(f"decoder layer type {layer_type!r} is not supported (llama or qwen3)")
    known = {k: v for k, v in fields.items() if k not in ("architectures", "auto_map", "model_type", "transformers_version")}
    try:
        return classes[layer_type](**known)
    except (TypeError, ValueError, KeyError) as error:
        raise Eagle3FormatError(f"the decoder layer config does not read as {layer_type}: {error}") from error


def parse_eagle3_config(raw: Mapping[str, Any]) -> Eagle3Config:
    """Read an EAGLE-3 config.json (either layout); raises `Eagle3FormatError` naming the first bad field."""
    layout = detect_layout(raw)
    if layout == SPECULATORS_LAYOUT:
        fields = raw.get("transformer_layer_config")
        if not isinstance(fields, Mapping):
            raise Eagle3FormatError("speculators config lacks the transformer_layer_config object")
        layer_type = str(fields.get("model_type", "qwen3"))  # speculators' default layer config is Qwen3Config
        aux = _ids(raw.get("eagle_aux_hidden_state_layer_ids"), "eagle_aux_hidden_state_layer_ids")
        section = raw.get("speculators_config") or {}
        methods = section.get("proposal_methods") if isinstance(section, Mapping) else None
        tokens = methods[0].get("speculative_tokens") if methods and isinstance(methods[0], Mapping) else None
        flags = {name: bool(raw.get(name, False)) for name in ("norm_before_residual", "norm_before_fc", "fc_norm")}
        norm_output, offset = bool(raw.get("norm_output", False)), 1
    elif layout == DEEPSPEC_LAYOUT:
        fields, layer_type = raw, "qwen3"
        layer_ids = _ids(raw.get("target_layer_ids"), "target_layer_ids")
        if layer_ids is None:
            raise Eagle3FormatError("DeepSpec EAGLE-3 config lacks target_layer_ids")
        # DeepSpec's extract_eagle3_context_feature reads hidden_states[layer_id + 1]: the layer's output.
        aux = tuple(i + 1 for i in layer_ids)
        layers = raw.get("draft_num_hidden_layers", raw.get("num_hidden_layers"))
        if layers != 1:
            raise Eagle3FormatError(
                f"DeepSpec EAGLE-3 heads with {layers!r} decoder layers have no reference decode (DeepSpec's own "
                "evaluator runs single-layer heads only)"
            )
        ttt = raw.get("ttt_length")
        tokens = ttt if isinstance(ttt, int) and not isinstance(ttt, bool) else None
        flags = {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False}
        norm_output, offset = False, 0
    else:
        fields = {k: v for k, v in raw.items() if k not in ("eagle_config", "draft_vocab_size", "target_hidden_size")}
        layer_type = "llama"
        eagle = raw.get("eagle_config") or {}
        if not isinstance(eagle, Mapping):
            raise Eagle3FormatError("eagle_config must be a JSON object")
        layer_ids = _ids(eagle.get("eagle_aux_hidden_state_layer_ids"), "eagle_aux_hidden_state_layer_ids")
        # SpecForge/SGLang ids name the layer whose output is read: hidden-state entry id + 1.
        aux = None if layer_ids is None else tuple(i + 1 for i in layer_ids)
        tokens = None
        flags = {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False}
        norm_output, offset = False, 0
    if flags["norm_before_fc"] and flags["fc_norm"]:
        raise Eagle3FormatError("norm_before_fc and fc_norm are mutually exclusive")
    layer = _layer_config(layer_type, fields)
    hidden = _positive("hidden_size", layer.hidden_size)
    heads = _positive("num_attention_heads", layer.num_attention_heads)
    kv_heads = _positive("num_key_value_heads", layer.num_key_value_heads or heads)
    if heads % kv_heads:
        raise Eagle3FormatError(f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv_heads})")
    vocab = _positive("vocab_size", layer.vocab_size)
    draft_vocab = raw.get("draft_vocab_size", raw.get("truncated_vocab_size")) or vocab
    target_hidden = raw.get("target_hidden_size") or hidden
    hidden_act = str(layer.hidden_act)
    from transformers.activations import ACT2FN

    if hidden_act not in ACT2FN:
        raise Eagle3FormatError(f"hidden_act {hidden_act!r} is not an activation transformers knows")
    return Eagle3Config(
        layout=layout,
        layer_type=layer_type,
        hidden_size=hidden,
        num_hidden_layers=_positive("num_hidden_layers", layer.num_hidden_layers),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=_positive("head_dim", getattr(layer, "head_dim", None) or hidden // heads),
        intermediate_size=_positive("intermediate_size", layer.intermediate_size),
        rms_norm_eps=float(layer.rms_norm_eps),
        hidden_act=hidden_act,
        attention_bias=bool(getattr(layer, "attention_bias", False)),
        vocab_size=vocab,
        draft_vocab_size=_positive("draft_vocab_size", draft_vocab),
        target_hidden_size=_positive("target_hidden_size", target_hidden),
        aux_hidden_state_indices=aux,
        norm_output=norm_output,
        position_offset=offset,
        speculative_tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else None,
        layer_config=layer,
        **flags,
    )


def expected_weight_shapes(config: Eagle3Config, num_fused: int) -> dict[str, tuple[int, ...]]:
    """The required tensors in the canonical (speculators) names; see `stored_name` for yuhuili's."""
    hidden, head_dim = config.hidden_size, config.head_dim
    q_width, kv_width = config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "fc.weight": (hidden, num_fused * config.target_hidden_size),
        "norm.weight": (hidden,),
        "layers.0.hidden_norm.weight": (hidden,),
    }
    for i in range(config.num_hidden_layers):
        width = 2 * hidden if i == 0 else hidden
        prefix = f"layers.{i}"
        shapes |= {
            f"{prefix}.self_attn.q_proj.weight": (q_width, width),
            f"{prefix}.self_attn.k_proj.weight": (kv_width, width),
            f"{prefix}.self_attn.v_proj.weight": (kv_width, width),
            f"{prefix}.self_attn.o_proj.weight": (hidden, q_width),
            f"{prefix}.mlp.gate_proj.weight": (config.intermediate_size, hidden),
            f"{prefix}.mlp.up_proj.weight": (config.intermediate_size, hidden),
            f"{prefix}.mlp.down_proj.weight": (hidden, config.intermediate_size),
            f"{prefix}.input_layernorm.weight": (hidden,),
            f"{prefix}.post_attention_layernorm.weight": (hidden,),
        }
        if config.has_qk_norm:
            shapes |= {f"{prefix}.self_attn.q_norm.weight": (head_dim,), f"{prefix}.self_attn.k_norm.weight": (head_dim,)}
        if config.attention_bias:
            shapes |= {
                f"{prefix}.self_attn.q_proj.bias": (q_width,),
                f"{prefix}.self_attn.k_proj.bias": (kv_width,),
                f"{prefix}.self_attn.v_proj.bias": (kv_width,),
                f"{prefix}.self_attn.o_proj.bias": (hidden,),
            }
    if config.norm_before_fc:
        shapes["input_norm.weight"] = (num_fused * config.target_hidden_size,)
    if config.fc_norm:
        shapes |= {f"fc_norm.{i}.weight": (config.target_hidden_size,) for i in range(num_fused)}
    return shapes


def optional_weight_shapes(config: Eagle3Config) -> dict[str, tuple[int, ...]]:
    """Tensors a folder may or may not carry: then the target's embedding / LM head, or no vocabulary map."""
    shapes: dict[str, tuple[int, ...]] = {
        "embed_tokens.weight": (config.vocab_size, config.hidden_size),
        "lm_head.weight": (config.draft_vocab_size, config.hidden_size),
        "fc.bias": (config.hidden_size,),
    }
    if config.draft_vocab_size != config.vocab_size:
        shapes |= {"d2t": (config.draft_vocab_size,), "t2d": (config.vocab_size,)}
    return shapes


def stored_name(layout: str, canonical: str) -> str:
    """The name a layout stores a canonical tensor under; yuhuili's one decoder layer is `midlayer`."""
    if layout == YUHUILI_LAYOUT and canonical.startswith("layers.0."):
        return "midlayer." + canonical[len("layers.0.") :]
    return canonical


def weight_problems(config: Eagle3Config, num_fused: int, stored: Mapping[str, tuple[int, ...]]) -> list[str]:
    """What does not match the layout (empty = it fits), in the layout's own tensor names."""
    required = expected_weight_shapes(config, num_fused)
    optional = optional_weight_shapes(config)
    expected = required | {name: shape for name, shape in optional.items() if stored_name(config.layout, name) in stored}
    expected.pop("t2d", None)
    problems = layout_problems(
        # t2d is never read; a d2t over the full vocabulary is the identity.
        {n: shape for n, shape in stored.items() if n != "t2d" and (n != "d2t" or "d2t" in expected)},
        {stored_name(config.layout, name): shape for name, shape in expected.items()},
    )
    if config.draft_vocab_size != config.vocab_size:
        if "d2t" not in stored:
            problems.append(f"missing tensor d2t [{config.draft_vocab_size}] (draft_vocab_size != vocab_size)")
        if "lm_head.weight" not in stored:
            problems.append(f"missing tensor lm_head.weight [{config.draft_vocab_size}, {config.hidden_size}]")
    return problems


# --------------------------------------------------------------------------------------------------------------
# The draft model
# --------------------------------------------------------------------------------------------------------------


def _rotary(config: Eagle3Config) -> nn.Module:
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
        self.rotary = _rotary(config)

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


# --------------------------------------------------------------------------------------------------------------
# Loading and the proposer
# --------------------------------------------------------------------------------------------------------------


def load_eagle3(
    drafter_dir: Path, config: Eagle3Config, num_fused: int, *, device: torch.device, dtype: torch.dtype
) -> Eagle3DraftModel:
    """The drafter with its folder's weights; an unknown layout is refused with the tensors that did not match."""
    stored = read_drafter_weights(drafter_dir)
    problems = weight_problems(config, num_fused, {name: tuple(t.shape) for name, t in stored.items()})
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise Eagle3FormatError(f"{drafter_dir}: the weights do not follow the EAGLE-3 {config.layout} layout: {shown}")
    canonical = {stored_name(config.layout, name): name for name in expected_weight_shapes(config, num_fused)}
    canonical |= {stored_name(config.layout, name): name for name in optional_weight_shapes(config)}
    # t2d (target -> draft mask) is the inverse of d2t: nothing reads it.
    tensors = {canonical[name]: tensor for name, tensor in stored.items() if name in canonical and name != "t2d"}
    if config.draft_vocab_size == config.vocab_size:
        tensors.pop("d2t", None)
    with torch.device("meta"):
        model = Eagle3DraftModel(
            config,
            num_fused,
            own_embedding="embed_tokens.weight" in tensors,
            own_lm_head="lm_head.weight" in tensors,
            fc_bias="fc.bias" in tensors,
        )
    rotary = _rotary(config)  # its inv_freq buffer is computed, not stored
    model.rotary = rotary
    missing, unexpected = model.load_state_dict(tensors, strict=False, assign=True)
    missing = [name for name in missing if not name.startswith("rotary.")]
    if missing or unexpected:
        raise Eagle3FormatError(f"{drafter_dir}: tensors missing {missing[:6]}, unexpected {unexpected[:6]}")
    model = model.to(device=device)
    for name, parameter in model.named_parameters():
        parameter.data = parameter.data.to(dtype)
    return model.eval()


def draft_to_target(config: Eagle3Config, model: Eagle3DraftModel) -> torch.Tensor | None:
    """Target id of each draft id ([Dv] long), or None when the drafter speaks the whole target vocabulary."""
    if config.draft_vocab_size == config.vocab_size:
        return None
    return torch.arange(config.draft_vocab_size, device=model.d2t.device) + model.d2t


class Eagle3Proposer:
    """Drafts a chain of tokens per round with an EAGLE-3 head; greedy, or sampled with q rows for exact sampling."""

    needs_hidden_states = True

    def __init__(
        self,
        model: Eagle3DraftModel,
        *,
        embedding: nn.Module,
        lm_head: nn.Module,
        target_vocab: int,
        hidden_state_indices: tuple[int, ...],
        draft_length: int,
    ) -> None:
        """`embedding` / `lm_head`: the head's own when its folder has them, else the target's."""
        if draft_length < 1:
            raise ValueError("draft_length must be at least 1 for EAGLE-3")
        self.model = model
        self.indices = hidden_state_indices
        self.draft_length = draft_length
        self.embedding = embedding
        self.lm_head = lm_head
        self.target_vocab = target_vocab
        self.to_target = draft_to_target(model.config, model)
        self.last_logits: list[torch.Tensor] = []  # draft-vocab logits of the last round's steps (for checks)
        self.cache = DraftCache(layers=[])
        self.committed_rows = 0  # cache rows computed from target features (valid across rounds)
        self.pending: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # fused, tokens, positions

    def _take(self, target_out: TargetOutput) -> None:
        if target_out.hidden_states is None:
            raise RuntimeError("hidden states were not captured: set needs_hidden_states = True on the proposer")
        fused = torch.cat([target_out.hidden_states[i] for i in self.indices], dim=-1)
        device = fused.device
        # Row i pairs the state at position i with the token at i + 1; the last row's token is the pending one.
        tokens = torch.cat([target_out.input_ids[1:].to(device), torch.tensor([target_out.pending_token], device=device)])
        positions = torch.arange(target_out.start, target_out.end, device=device)
        self.pending = (fused, tokens, positions)

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.cache = DraftCache(layers=[])
        self.committed_rows = 0
        self._take(target_out)

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self._take(target_out)

    def _to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids if self.to_target is None else self.to_target[draft_ids]

    def draft_logits(self, choose) -> list[torch.Tensor]:
        """Run the chain; `choose(logits [Dv]) -> draft id` picks each token. Returns the per-step logits."""
        if self.pending is None:
            raise RuntimeError("propose() was called before begin()")
        fused, tokens, positions = self.pending
        self.cache.crop(self.committed_rows)
        hidden = self.model.project_features(fused.to(self.model.fc.weight.dtype))
        embeds = self.embedding(tokens[None]).to(hidden.dtype)
        normed, state = self.model(hidden, embeds, positions, self.cache)
        self.committed_rows = self.cache.length
        self.pending = (fused[:, :0], tokens[:0], positions[:0])
        position = int(positions[-1]) if positions.numel() else self.committed_rows - 1
        step_logits: list[torch.Tensor] = []
        state, normed = state[:, -1:], normed[:, -1:]
        for step in range(self.draft_length):
            logits = self.lm_head(normed[0, -1])
            step_logits.append(logits)
            if step == self.draft_length - 1:
                break
            draft_id = choose(logits)
            token = self._to_target_ids(torch.tensor([draft_id], device=logits.device))
            position += 1
            normed, state = self.model(
                state, self.embedding(token[None]).to(state.dtype), torch.tensor([position], device=logits.device), self.cache
            )
        return step_logits

    @torch.inference_mode()
    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        chosen: list[int] = []
        q_rows: list[torch.Tensor] = []

        def choose(logits: torch.Tensor) -> int:
            if temperature <= 0:
                draft_id = int(torch.argmax(logits))
            else:
                q = torch.softmax(logits.float() / temperature, dim=-1)
                draft_id = int(torch.multinomial(q, 1, generator=generator))
                q_rows.append(q)
            chosen.append(draft_id)
            return draft_id

        step_logits = self.draft_logits(choose)
        choose(step_logits[-1])
        self.last_logits = step_logits
        draft_ids = torch.tensor(chosen, device=step_logits[0].device)
        tokens = self._to_target_ids(draft_ids)
        if temperature <= 0:
            return Proposal(tokens=tokens)
        q_draft = torch.stack(q_rows)
        q_probs = torch.zeros(q_draft.shape[0], self.target_vocab, device=q_draft.device)
        columns = torch.arange(q_draft.shape[1], device=q_draft.device) if self.to_target is None else self.to_target
        q_probs[:, columns] = q_draft
        return Proposal(tokens=tokens, q_probs=q_probs)


@dataclass(frozen=True)
class TargetShape:
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int


def target_shape(model: Any) -> TargetShape:
    text = model.config.get_text_config()
    return TargetShape(int(text.hidden_size), int(text.num_hidden_layers), int(model.get_output_embeddings().weight.shape[0]))


def compatibility_problems(config: Eagle3Config, target: TargetShape) -> list[str]:
    """Why this head cannot run on this target (empty = compatible); the same rules as registry.compat."""
    problems: list[str] = []
    if config.target_hidden_size != target.hidden_size:
        field = "target_hidden_size" if config.target_hidden_size != config.hidden_size else "hidden_size"
        problems.append(f"target hidden_size {target.hidden_size} != drafter {field} {config.target_hidden_size}")
    if config.vocab_size != target.vocab_size:
        problems.append(f"target vocab_size {target.vocab_size} != drafter vocab_size {config.vocab_size}")
    if config.draft_vocab_size > target.vocab_size:
        problems.append(f"target vocab_size {target.vocab_size} < draft_vocab_size {config.draft_vocab_size}")
    # As registry.compat counts them: the fused states are outputs of decoder layers 0 .. N - 1 (entries 1 .. N).
    layer_ids = [i - 1 for i in config.hidden_state_indices(target.num_hidden_layers)]
    outside = [i for i in layer_ids if not 0 <= i < target.num_hidden_layers]
    if outside:
        problems.append(
            f"fused layer outputs {layer_ids} outside the target's {target.num_hidden_layers} layers "
            f"[0, {target.num_hidden_layers}): {outside}"
        )
    return problems


def build_proposer(drafter_dir: Path, target: LoadedTarget, settings: RunSettings) -> Eagle3Proposer:
    """An EAGLE-3 proposer for `target`; raises `IncompatiblePair` when the head cannot serve this target."""
    from verifier.decode import rollback_problem
    from verifier.engines.pytorch import IncompatiblePair

    drafter_dir = Path(drafter_dir)
    config = parse_eagle3_config(read_config(drafter_dir))
    shape = target_shape(target.model)
    problems = compatibility_problems(config, shape)
    rollback = rollback_problem(target.model)
    if rollback is not None:
        problems.append(f"target: {rollback}")
    if problems:
        raise IncompatiblePair(problems)
    indices = config.hidden_state_indices(shape.num_hidden_layers)
    parameter = next(target.model.parameters())
    model = load_eagle3(drafter_dir, config, len(indices), device=parameter.device, dtype=parameter.dtype)
    default = config.speculative_tokens or DEFAULT_DRAFT_LENGTH
    draft_length = default if settings.draft_length is None else settings.draft_length
    return Eagle3Proposer(
        model,
        embedding=model.embed_tokens if hasattr(model, "embed_tokens") else target.model.get_input_embeddings(),
        lm_head=model.lm_head if hasattr(model, "lm_head") else target.model.get_output_embeddings(),
        target_vocab=shape.vocab_size,
        hidden_state_indices=indices,
        draft_length=draft_length,
    )
