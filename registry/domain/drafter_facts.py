"""The drafting method a drafter config declares, and the facts read from drafter configs of every known format.

Pure: no I/O. Like configs.py, every reader accepts any dict and reports absurd values in `problems`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The config readers are shared with configs.py, which reads model configs the same way.
from registry.domain.configs import (
    MAX_BLOCK_SIZE,
    MAX_HIDDEN_SIZE,
    MAX_LAYERS,
    MAX_VOCAB_SIZE,
    MAX_WINDOW,
    ModelFacts,
    _model_facts,
    _Reader,
    _section,
    _unique,
)

DFLASH_FAMILY = frozenset({"dflash", "dflash2", "dspark"})

_ARCHITECTURE_METHODS = {
    "DFlashDraftModel": "dflash",
    "DFlash2DraftModel": "dflash2",
    "DFlashSpeculator": "dflash",
    "DSparkSpeculator": "dspark",
    "Gemma4AssistantForCausalLM": "gemma4-assistant",
    "Gemma4UnifiedAssistantForCausalLM": "gemma4-assistant",
    "LlamaForCausalLMEagle3": "eagle3",
    "Eagle3Speculator": "eagle3",
    "Qwen3Eagle3Model": "eagle3",  # DeepSpec
    "Gemma4Eagle3Model": "eagle3",  # DeepSpec
}
_SPECULATORS_METHODS = {"eagle3": "eagle3", "dflash": "dflash", "dspark": "dspark", "dflash2": "dflash2"}
_METHOD_NAME = re.compile(r"[a-z][a-z0-9_-]{0,23}")


def detect_method(config: dict) -> str | None:
    """The drafting method a drafter config declares, or None for an ordinary causal LM.

    Speculators types without rules here ("eagle", "peagle", "mtp") come back under their own name so a caller
    never mistakes them for a plain draft model.
    """
    speculators_type = config.get("speculators_model_type")
    if isinstance(speculators_type, str) and speculators_type:
        lowered = speculators_type.lower()
        # The name reaches alerts, feeds and pages: only a plain identifier passes; anything else is "unknown".
        return _SPECULATORS_METHODS.get(lowered, lowered if _METHOD_NAME.fullmatch(lowered) else "unknown")
    architectures = config.get("architectures")
    names = [a for a in architectures if isinstance(a, str)] if isinstance(architectures, list) else []
    for name in names:
        method = _ARCHITECTURE_METHODS.get(name)
        if method == "dflash" and _is_dspark_export(config):
            return "dspark"
        if method is not None:
            return method
    if isinstance(config.get("dflash_config"), dict):
        return "dspark" if _is_dspark_export(config) else "dflash"
    model_type = config.get("model_type")
    if isinstance(model_type, str) and "gemma4" in model_type and "assistant" in model_type:
        return "gemma4-assistant"
    if _looks_like_eagle3(config):
        return "eagle3"
    return None


def _is_dspark_export(config: Mapping[str, Any]) -> bool:
    section = config.get("dflash_config")
    return isinstance(section, dict) and section.get("projector_type") == "dspark"


def _looks_like_eagle3(config: Mapping[str, Any]) -> bool:
    """EAGLE-3 heads saved as plain LlamaForCausalLM (nebius) still carry a reduced draft vocab and one layer."""
    if isinstance(config.get("eagle_config"), dict):
        return True
    has_draft_vocab = config.get("draft_vocab_size") is not None or config.get("truncated_vocab_size") is not None
    layers = config.get("num_hidden_layers")
    return has_draft_vocab and type(layers) is int and layers == 1



@dataclass(frozen=True)
class DrafterFacts:
    method: str | None
    block_size: int | None
    target_layer_ids: tuple[int, ...] | None
    # True when the config had no target_layer_ids and they were computed by build_target_layer_ids.
    target_layer_ids_defaulted: bool
    num_target_layers: int | None
    mask_token_id: int | None
    hidden_size: int | None
    vocab_size: int | None
    draft_vocab_size: int | None
    target_hidden_size: int | None
    backbone_hidden_size: int | None
    aux_layer_ids: tuple[int, ...] | None
    verifier_name: str | None
    verifier_architectures: tuple[str, ...] | None
    speculative_tokens: int | None
    layer_types: tuple[str, ...] | None
    sliding_window: int | None
    final_logit_softcapping: float | None
    model: ModelFacts
    problems: tuple[str, ...]
    # True when aux_layer_ids came from speculators' top-level ids, which count hidden states (0 = embeddings):
    # the facts hold them as layer ids (index - 1) like SpecForge's `eagle_config` ids.
    aux_ids_from_hidden_state_indices: bool = False

    @property
    def target_width(self) -> int | None:
        """The hidden size the target must have: the width of the target states the drafter reads."""
        if self.method == "gemma4-assistant":
            return self.backbone_hidden_size or self.hidden_size
        if self.method == "eagle3":
            return self.target_hidden_size or self.hidden_size
        return self.hidden_size


def build_target_layer_ids(num_target_layers: int, num_fused: int) -> tuple[int, ...]:
    """z-lab's default fused layers: evenly spaced from layer 1 to N-3, or the middle layer when k is 1."""
    if num_fused <= 1:
        return (num_target_layers // 2,)
    step = (num_target_layers - 4) / (num_fused - 1)
    return tuple(int(round(1 + i * step)) for i in range(num_fused))


def drafter_facts(config: dict, method: str | None = None) -> DrafterFacts:
    """Facts of a drafter config in any of the known formats (DFlash 1/2, DSpark, speculators, EAGLE-3, Gemma 4)."""
    method = method or detect_method(config)
    speculators = "speculators_model_type" in config or "speculators_config" in config
    model = _model_facts(config, "transformer_layer_config" if speculators else "text_config")
    problems = list(model.problems)

    dflash = _Reader.nested(config, "dflash_config", problems)
    top = _Reader([config], problems)
    nested = _Reader.nested(config, "transformer_layer_config" if speculators else "text_config", problems)
    eagle_section = _section(config, "eagle_config", problems)
    aux_layer_ids = _Reader([eagle_section] if eagle_section else [], problems).integers("eagle_aux_hidden_state_layer_ids")
    hidden_state_indices = None if aux_layer_ids is not None else top.integers("eagle_aux_hidden_state_layer_ids")
    if hidden_state_indices is not None:
        aux_layer_ids = tuple(i - 1 for i in hidden_state_indices)
    if aux_layer_ids is None and method == "eagle3" and not speculators:
        # DeepSpec's EAGLE-3 config names the fused layer outputs top-level, as `target_layer_ids`.
        aux_layer_ids = top.integers("target_layer_ids")

    num_target_layers = dflash.integer("num_target_layers", maximum=MAX_LAYERS)
    target_layer_ids = dflash.integers("target_layer_ids")
    if target_layer_ids is None:
        # speculators counts hidden states (0 = embeddings): its index i is z-lab's layer id i - 1.
        aux_indices = dflash.integers("aux_hidden_state_layer_ids")
        target_layer_ids = None if aux_indices is None else tuple(i - 1 for i in aux_indices)
    defaulted = False
    if (
        target_layer_ids is None
        and method in DFLASH_FAMILY
        and num_target_layers is not None
        and model.num_hidden_layers is not None
    ):
        target_layer_ids = build_target_layer_ids(num_target_layers, model.num_hidden_layers)
        defaulted = True

    verifier_name, verifier_architectures, speculative_tokens = _speculators_section(config, problems)
    return DrafterFacts(
        method=method,
        block_size=dflash.integer("block_size", maximum=MAX_BLOCK_SIZE),
        target_layer_ids=target_layer_ids,
        target_layer_ids_defaulted=defaulted,
        num_target_layers=num_target_layers,
        mask_token_id=dflash.token_id("mask_token_id"),
        hidden_size=model.hidden_size,
        vocab_size=model.vocab_size,
        draft_vocab_size=(
            top.integer("draft_vocab_size", maximum=MAX_VOCAB_SIZE)
            or top.integer("truncated_vocab_size", maximum=MAX_VOCAB_SIZE)
        ),
        target_hidden_size=top.integer("target_hidden_size", maximum=MAX_HIDDEN_SIZE),
        backbone_hidden_size=top.integer("backbone_hidden_size", maximum=MAX_HIDDEN_SIZE),
        aux_layer_ids=aux_layer_ids,
        verifier_name=verifier_name,
        verifier_architectures=verifier_architectures,
        speculative_tokens=speculative_tokens,
        layer_types=nested.strings("layer_types"),
        sliding_window=nested.integer("sliding_window", maximum=MAX_WINDOW),
        final_logit_softcapping=_Reader([*dflash.layers[:-1], *nested.layers], problems).positive_number(
            "final_logit_softcapping"
        ),
        model=model,
        problems=_unique(problems),
        aux_ids_from_hidden_state_indices=hidden_state_indices is not None,
    )


def _speculators_section(
    config: Mapping[str, Any], problems: list[str]
) -> tuple[str | None, tuple[str, ...] | None, int | None]:
    """(verifier name_or_path, verifier architectures, speculative tokens of the first proposal method)."""
    section = _section(config, "speculators_config", problems)
    if section is None:
        return None, None, None
    verifier = _section(section, "verifier", problems, label="speculators_config.verifier")
    reader = _Reader([verifier] if verifier is not None else [], problems)
    name = reader.string("name_or_path")
    architectures = reader.strings("architectures")
    speculative_tokens = None
    methods = section.get("proposal_methods")
    if isinstance(methods, list) and methods and isinstance(methods[0], dict):
        speculative_tokens = _Reader([methods[0]], problems).integer("speculative_tokens", maximum=MAX_BLOCK_SIZE)
    elif methods is not None:
        problems.append("speculators_config.proposal_methods is not a list of objects")
    return name, architectures, speculative_tokens


# Config keys that give a full checkpoint's own multi-token-prediction layers (how many): DeepSeek-V3/V4, GLM-4.5
# and later, MiMo (`num_nextn_predict_layers`, read by vllm-project/vllm
# vllm/model_executor/models/deepseek_mtp.py); Qwen3-Next and Qwen3.5/3.6 (`mtp_num_hidden_layers`, in
# text_config for the multimodal ones, read by vllm/model_executor/models/qwen3_5_mtp.py).
MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")


def built_in_methods(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The drafting methods a full checkpoint's own config says it ships inside: "mtp" for one MTP layer or more,
    "dspark" for a DSpark module (its `dflash_config` section with `projector_type: "dspark"`, as DSpark exports
    carry). A malformed value says nothing: the checkpoint is not marked."""
    reader = _Reader.nested(config, "text_config")
    methods = set()
    if any((reader.integer(key, minimum=0, maximum=MAX_LAYERS) or 0) >= 1 for key in MTP_LAYER_KEYS):
        methods.add("mtp")
    if _is_dspark_export(config):
        methods.add("dspark")
    return tuple(sorted(methods))
