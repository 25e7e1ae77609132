"""Loading target and drafter folders safely: safetensors only, no remote code, no network.

A folder is a local checkout (config.json + *.safetensors (+ index) + tokenizer files) or a snapshot in the local
Hugging Face cache found by repo id + sha.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

CONFIG_FILE = "config.json"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


class LoadError(ValueError):
    """A folder cannot be loaded safely; the message says why and what to do."""


@dataclass
class LoadedTarget:
    model: Any  # a transformers PreTrainedModel for causal LM, in eval mode
    tokenizer: Any  # a transformers tokenizer
    config: dict[str, Any]  # config.json as read from disk
    path: Path
    files_digest: str  # sha256 over the digests of config.json and the weight files

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def resolve_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise LoadError(f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}") from None


def read_config(folder: Path) -> dict[str, Any]:
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        raise LoadError(f"{folder} has no {CONFIG_FILE}")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise LoadError(f"{config_path} is not valid JSON: {error}") from error
    if not isinstance(config, dict):
        raise LoadError(f"{config_path} must hold a JSON object")
    return config


def weight_files(folder: Path) -> list[Path]:
    """The safetensors weight files of `folder`; refuses folders that only have pickle weights."""
    safetensors = sorted(folder.glob("*.safetensors"))
    if safetensors:
        return safetensors
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_WEIGHT_SUFFIXES)
    if pickles:
        raise LoadError(
            f"{folder} has only pickle weights ({', '.join(pickles)}); the verifier loads safetensors only "
            "because pickle files can run arbitrary code. Convert the weights to safetensors first."
        )
    raise LoadError(f"{folder} has no *.safetensors weight files")


def weight_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in weight_files(folder))


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def files_digest(folder: Path) -> str:
    """sha256 over `name:sha256` lines of config.json, the safetensors index (if any) and the weight files."""
    files = [folder / CONFIG_FILE, *weight_files(folder)]
    if (folder / SAFETENSORS_INDEX).is_file():
        files.append(folder / SAFETENSORS_INDEX)
    lines = sorted(f"{path.name}:{file_sha256(path)}" for path in files)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def refuse_remote_code(folder: Path, config: dict[str, Any]) -> None:
    """Refuse a config whose model class only exists in the publisher's own code (`auto_map`)."""
    from transformers import CONFIG_MAPPING

    model_type = config.get("model_type")
    if "auto_map" in config and model_type not in CONFIG_MAPPING:
        raise LoadError(
            f"{folder}: model_type {model_type!r} is not built into transformers and its config points at the "
            "publisher's own code (auto_map); the verifier never runs remote code"
        )
    if model_type not in CONFIG_MAPPING:
        raise LoadError(f"{folder}: model_type {model_type!r} is not supported by the installed transformers")


def _auto_class(folder: Path, config: dict[str, Any]) -> Any:
    """AutoModelForCausalLM, or AutoModelForImageTextToText for publications whose only generating class is the
    multimodal one (Kimi-K2.5: a DeepSeek-V3 text model under a vision wrapper); both take text-only input."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    model_type = config.get("model_type")
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    if model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES:
        return AutoModelForImageTextToText
    raise LoadError(
        f"{folder}: model_type {model_type!r} has no text-generating model class in the installed transformers"
    )


def load_causal_lm(folder: Path, *, device: torch.device, dtype: torch.dtype) -> Any:
    """A transformers causal LM from `folder`, safetensors only, remote code refused, in eval mode."""
    from transformers.utils import logging as transformers_logging

    config = read_config(folder)
    refuse_remote_code(folder, config)
    weight_files(folder)
    auto_class = _auto_class(folder, config)
    # A progress bar per load would bury the CLI's own progress and tables.
    transformers_logging.disable_progress_bar()
    model = auto_class.from_pretrained(
        folder, trust_remote_code=False, use_safetensors=True, dtype=dtype, local_files_only=True
    )
    return model.to(device).eval()


def load_target(folder: Path, *, device: str = "auto", dtype: str = "float32") -> LoadedTarget:
    """Load a target model with its tokenizer from a local folder."""
    from transformers import AutoTokenizer

    folder = Path(folder)
    if not folder.is_dir():
        raise LoadError(f"{folder} is not a folder")
    config = read_config(folder)
    model = load_causal_lm(folder, device=resolve_device(device), dtype=resolve_dtype(dtype))
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except (OSError, ValueError) as error:
        raise LoadError(f"{folder}: the tokenizer cannot be loaded: {error}") from error
    return LoadedTarget(model=model, tokenizer=tokenizer, config=config, path=folder, files_digest=files_digest(folder))


def cached_snapshot(repo_id: str, revision: str, *, cache_dir: Path | None = None) -> Path:
    """The folder of `repo_id` at `revision` in the local Hugging Face cache; never touches the network."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=True)
    except LocalEntryNotFoundError as error:
        raise LoadError(
            f"{repo_id}@{revision} is not in the local Hugging Face cache; download it first "
            "(the verifier never downloads)"
        ) from error
    return Path(folder)
