"""The tokenizer digest: sha256 over what decides token ids, read from a repo's tokenizer files.

Pure: no I/O. Only `tokenizer_digest` raises, and only `ConfigError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from registry.domain.configs import ConfigError, _canonical_json, _show, parse_config

# tokenizer.json of 262K-vocab models (Gemma) is about 33 MB.
MAX_TOKENIZER_BYTES = 200_000_000

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
