"""EAGLE-3 drafter configs in their published layouts, without torch: parsing, the expected weights and what a
target must agree with.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verifier.folders import LoadError
from verifier.methods.dflash.config import layout_problems


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
