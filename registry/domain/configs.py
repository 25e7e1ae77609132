"""Safe parsing of config.json bytes, the facts the registry reads from model configs, and the config readers.

Pure: no I/O. Every reader accepts any dict (configs come from strangers on the Hub) and reports absurd values
in `problems` instead of raising; only `parse_config` raises, and only `ConfigError`. Drafter configs are read in
drafter_facts.py and tokenizer files in tokenizers.py, with the readers defined here.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_CONFIG_BYTES = 4_000_000

# Upper bounds past which a value is taken as corrupt rather than a very large model.
MAX_VOCAB_SIZE = 10**8
MAX_HIDDEN_SIZE = 10**7
MAX_LAYERS = 10**5
MAX_HEADS = 10**5
MAX_HEAD_DIM = 10**6
MAX_BLOCK_SIZE = 10**5
MAX_WINDOW = 10**9

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
