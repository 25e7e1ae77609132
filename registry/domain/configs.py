"""Safe parsing of config.json bytes and the facts the registry reads from model and drafter configs.

Pure: no I/O. Every reader accepts any dict (configs come from strangers on the Hub) and reports absurd values
in `problems` instead of raising; only `parse_config` and `tokenizer_digest` raise, and only `ConfigError`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_CONFIG_BYTES = 4_000_000
# tokenizer.json of 262K-vocab models (Gemma) is about 33 MB.
MAX_TOKENIZER_BYTES = 200_000_000

# Upper bounds past which a value is taken as corrupt rather than a very large model.
MAX_VOCAB_SIZE = 10**8
MAX_HIDDEN_SIZE = 10**7
MAX_LAYERS = 10**5
MAX_HEADS = 10**5
MAX_HEAD_DIM = 10**6
MAX_BLOCK_SIZE = 10**5
MAX_WINDOW = 10**9

DFLASH_FAMILY = frozenset({"dflash", "dflash2", "dspark"})

_SHOWN_CHARS = 60


class ConfigError(ValueError):
    """A config or tokenizer file that cannot be used; str() is a one-line human reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(" ".join(reason.split()))


def parse_config(raw: bytes, *, max_bytes: int = MAX_CONFIG_BYTES) -> dict:
    """The JSON object in `raw`, or ConfigError saying why not (size, encoding, syntax, or not an object)."""
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise ConfigError(f"config must be bytes, got {type(raw).__name__}")
    size = raw.nbytes if isinstance(raw, memoryview) else len(raw)
    # Checked before copying or decoding so a huge body costs nothing.
    if size > max_bytes:
        raise ConfigError(f"config is {size:,} bytes, over the {max_bytes:,}-byte limit")
    data = bytes(raw)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"config is not UTF-8: byte 0x{data[error.start]:02x} at offset {error.start}") from None
    # Configs saved by some Windows editors start with a BOM, which Python's json refuses.
    text = text.removeprefix("\ufeff")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"config is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except RecursionError:
        raise ConfigError("config is nested too deeply to parse") from None
    except ValueError as error:  # e.g. an integer literal longer than Python's digit limit
        raise ConfigError(f"config is not usable JSON: {error}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"config is a JSON {_json_kind(value)}, not an object")
    return value


def config_fingerprint(config: dict) -> str:
    """sha256 of the config's canonical JSON: equal for equal content, whatever the key order or spacing."""
    return hashlib.sha256(_canonical_json(config)).hexdigest()


# ---- model facts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFacts:
    architectures: tuple[str, ...]
    model_type: str | None
    vocab_size: int | None
    hidden_size: int | None
    num_hidden_layers: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None
    head_dim: int | None
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]
    pad_token_id: int | None
    tie_word_embeddings: bool | None
    num_nextn_predict_layers: int | None
    quantization: str | None
    is_encoder_decoder: bool
    # True when the dimensions were looked up in a nested section (text_config, transformer_layer_config).
    nested: bool
    problems: tuple[str, ...]


def model_facts(config: dict) -> ModelFacts:
    """Facts of a model config; nested configs (Gemma 3/4, multimodal) are read from `text_config` first."""
    return _model_facts(config, "text_config")


def _model_facts(config: Mapping[str, Any], nested_key: str) -> ModelFacts:
    reader = _Reader.nested(config, nested_key)
    # architectures and model_type name the whole checkpoint (Gemma4ForConditionalGeneration / gemma4), so the
    # top level wins for them; the nested section only fills in when the top level lacks them.
    top_first = _Reader([reader.layers[-1], *reader.layers[:-1]], reader.problems)
    return ModelFacts(
        architectures=top_first.strings("architectures") or (),
        model_type=top_first.string("model_type"),
        vocab_size=reader.integer("vocab_size", maximum=MAX_VOCAB_SIZE),
        hidden_size=reader.integer("hidden_size", maximum=MAX_HIDDEN_SIZE),
        num_hidden_layers=reader.integer("num_hidden_layers", maximum=MAX_LAYERS),
        num_attention_heads=reader.integer("num_attention_heads", maximum=MAX_HEADS),
        num_key_value_heads=reader.integer("num_key_value_heads", maximum=MAX_HEADS),
        head_dim=reader.integer("head_dim", maximum=MAX_HEAD_DIM),
        bos_token_id=reader.token_id("bos_token_id"),
        eos_token_ids=reader.token_ids("eos_token_id"),
        pad_token_id=reader.token_id("pad_token_id"),
        tie_word_embeddings=reader.boolean("tie_word_embeddings"),
        num_nextn_predict_layers=reader.integer("num_nextn_predict_layers", minimum=0, maximum=MAX_LAYERS),
        quantization=_quantization(config, reader.problems),
        is_encoder_decoder=top_first.boolean("is_encoder_decoder") is True,
        nested=len(reader.layers) > 1,
        problems=_unique(reader.problems),
    )


def _quantization(config: Mapping[str, Any], problems: list[str]) -> str | None:
    section = config.get("quantization_config")
    if section is None:
        return None
    if not isinstance(section, dict):
        problems.append(f"quantization_config is a JSON {_json_kind(section)}, not an object")
        return None
    method = section.get("quant_method")
    return method if isinstance(method, str) and method else "unknown"


# ---- drafting method --------------------------------------------------------------------------

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


# ---- drafter facts ----------------------------------------------------------------------------


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


# ---- tokenizer digest -------------------------------------------------------------------------

_SPECIAL_ROLES = ("bos_token", "eos_token", "unk_token", "pad_token")
_ADD_FLAGS = ("add_bos_token", "add_eos_token")


def tokenizer_digest(files: dict[str, bytes]) -> str | None:
    """sha256 over what decides token ids, or None without tokenizer.json / tokenizer.model.

    Covers the tokenizer.json model (type, vocab, merges and the other model settings), its added tokens, or the
    raw tokenizer.model; plus the special tokens and add-BOS/EOS flags of tokenizer_config.json and
    special_tokens_map.json. JSON key order, spacing and file layout do not change it.
    """
    by_name = {name.rsplit("/", 1)[-1]: raw for name, raw in files.items()}
    if "tokenizer.json" in by_name:
        content: dict[str, Any] = {"tokenizer.json": _tokenizer_json_content(by_name["tokenizer.json"])}
    elif "tokenizer.model" in by_name:
        content = {"tokenizer.model": _sentencepiece_digest(by_name["tokenizer.model"])}
    else:
        return None
    content["special"] = _special_tokens(by_name)
    return hashlib.sha256(_canonical_json(content)).hexdigest()


def _parse_tokenizer_file(name: str, raw: bytes) -> dict:
    try:
        return parse_config(raw, max_bytes=MAX_TOKENIZER_BYTES)
    except ConfigError as error:
        raise ConfigError(f"{name} {str(error).removeprefix('config ')}") from None


def _tokenizer_json_content(raw: bytes) -> dict[str, Any]:
    tokenizer = _parse_tokenizer_file("tokenizer.json", raw)
    model = tokenizer.get("model")
    if not isinstance(model, dict):
        raise ConfigError("tokenizer.json has no model object")
    vocab = model.get("vocab")
    if not isinstance(vocab, (dict, list)):
        raise ConfigError("tokenizer.json model has no vocab (expected an object or a list)")
    content = dict(model)
    merges = model.get("merges")
    if merges is not None:
        content["merges"] = _normalized_merges(merges)
    added = tokenizer.get("added_tokens", [])
    if not isinstance(added, list) or not all(isinstance(t, dict) for t in added):
        raise ConfigError("tokenizer.json added_tokens is not a list of objects")
    # Only what maps text to ids; flags like lstrip/normalized change little and differ between re-saves.
    content["added_tokens"] = sorted(
        ([t.get("id"), t.get("content"), t.get("special")] for t in added), key=_canonical_json
    )
    return content


def _normalized_merges(merges: Any) -> list[str]:
    """Merges as "a b" strings: tokenizers >= 0.20 saves them as [a, b] pairs, older versions as strings."""
    if not isinstance(merges, list):
        raise ConfigError("tokenizer.json merges is not a list")
    normalized = []
    for merge in merges:
        if isinstance(merge, str):
            normalized.append(merge)
        elif isinstance(merge, list) and len(merge) == 2 and all(isinstance(part, str) for part in merge):
            normalized.append(f"{merge[0]} {merge[1]}")
        else:
            raise ConfigError(f"tokenizer.json has a malformed merge: {_show(merge)}")
    return normalized


def _sentencepiece_digest(raw: bytes) -> str:
    # A serialized SentencePiece ModelProto starts with its repeated `pieces` field (field 1, length-delimited).
    if not raw or raw[0] != 0x0A:
        raise ConfigError("tokenizer.model is not a SentencePiece model")
    return hashlib.sha256(raw).hexdigest()


def _special_tokens(by_name: Mapping[str, bytes]) -> dict[str, Any]:
    """Special tokens by role; tokenizer_config.json wins over special_tokens_map.json, which only fills gaps."""
    tokenizer_config = (
        _parse_tokenizer_file("tokenizer_config.json", by_name["tokenizer_config.json"])
        if "tokenizer_config.json" in by_name
        else {}
    )
    special_map = (
        _parse_tokenizer_file("special_tokens_map.json", by_name["special_tokens_map.json"])
        if "special_tokens_map.json" in by_name
        else {}
    )
    sources = (tokenizer_config, special_map)
    special: dict[str, Any] = {}
    for role in _SPECIAL_ROLES:
        for source in sources:
            token = _token_text(source.get(role))
            if token is not None:
                special[role] = token
                break
    for flag in _ADD_FLAGS:
        for source in sources:
            if isinstance(source.get(flag), bool):
                special[flag] = source[flag]
                break
    decoder = tokenizer_config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        special["added_tokens_decoder"] = {
            str(token_id): _token_text(entry) for token_id, entry in decoder.items()
        }
    return special


def _token_text(value: Any) -> str | None:
    """A special token given as "<s>" or as {"content": "<s>", ...}."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


# ---- reading helpers --------------------------------------------------------------------------


class _Reader:
    """Looks a key up in several sections in order (a nested one, then the top level), validating the value."""

    def __init__(self, layers: Sequence[Mapping[str, Any]], problems: list[str] | None = None) -> None:
        self.layers = list(layers)
        self.problems = problems if problems is not None else []

    @classmethod
    def nested(cls, config: Mapping[str, Any], key: str, problems: list[str] | None = None) -> _Reader:
        problems = problems if problems is not None else []
        section = _section(config, key, problems)
        return cls([section, config] if section is not None else [config], problems)

    def raw(self, key: str) -> Any:
        for layer in self.layers:
            value = layer.get(key)
            if value is not None:
                return value
        return None

    def integer(self, key: str, *, minimum: int = 1, maximum: int) -> int | None:
        return _checked_int(key, self.raw(key), minimum, maximum, self.problems)

    def token_id(self, key: str) -> int | None:
        return _checked_int(key, self.raw(key), 0, MAX_VOCAB_SIZE - 1, self.problems)

    def token_ids(self, key: str) -> tuple[int, ...]:
        value = self.raw(key)
        values = value if isinstance(value, list) else [] if value is None else [value]
        ids = [_checked_int(key, v, 0, MAX_VOCAB_SIZE - 1, self.problems) for v in values]
        return tuple(i for i in ids if i is not None)

    def integers(self, key: str) -> tuple[int, ...] | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            self.problems.append(f"{key} {_show(value)} is not a non-empty list of layer ids")
            return None
        ids = [_checked_int(key, v, 0, MAX_LAYERS, self.problems) for v in value]
        return None if None in ids else tuple(i for i in ids if i is not None)

    def string(self, key: str) -> str | None:
        value = self.raw(key)
        if value is None or isinstance(value, str):
            return value
        self.problems.append(f"{key} {_show(value)} is not a string")
        return None

    def strings(self, key: str) -> tuple[str, ...] | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problems.append(f"{key} {_show(value)} is not a list of strings")
            return None
        return tuple(value)

    def boolean(self, key: str) -> bool | None:
        value = self.raw(key)
        if value is None or isinstance(value, bool):
            return value
        self.problems.append(f"{key} {_show(value)} is not true or false")
        return None

    def positive_number(self, key: str) -> float | None:
        value = self.raw(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            self.problems.append(f"{key} {_show(value)} is not a positive number")
            return None
        return float(value)


def _section(config: Mapping[str, Any], key: str, problems: list[str], *, label: str | None = None) -> dict | None:
    value = config.get(key)
    if value is None or isinstance(value, dict):
        return value
    problems.append(f"{label or key} is a JSON {_json_kind(value)}, not an object")
    return None


def _checked_int(name: str, value: Any, minimum: int, maximum: int, problems: list[str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        problems.append(f"{name} {_show(value)} is a boolean, not an integer")
        return None
    if not isinstance(value, int):
        problems.append(f"{name} {_show(value)} is not an integer")
        return None
    if value < minimum:
        problems.append(f"{name} {value} is absurd (must be at least {minimum})")
        return None
    if value > maximum:
        problems.append(f"{name} {value} is absurd (over {maximum})")
        return None
    return value


def _unique(problems: list[str]) -> tuple[str, ...]:
    # The same section can be read for several facts; say each problem once.
    return tuple(dict.fromkeys(problems))


def _canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {list: "array", str: "string", dict: "object", type(None): "null"}.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    """A short, one-line rendering of an arbitrary config value for a problem message."""
    try:
        text = json.dumps(value, ensure_ascii=True) if _is_json_value(value) else repr(value)
    except (RecursionError, ValueError, TypeError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _is_json_value(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, list, dict)) or value is None
