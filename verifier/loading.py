"""Loading target and drafter folders into torch safely: safetensors only, no remote code, no network.

Reading folders without torch (config, weight files, digests, cached snapshots) lives in verifier/folders.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from registry.local import read_config
from verifier.folders import LoadError, files_digest, weight_files

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


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


def load_causal_lm(folder: Path, *, device: torch.device, dtype: torch.dtype,
                   config: dict[str, Any] | None = None) -> Any:
    """A transformers causal LM from `folder`, safetensors only, remote code refused, in eval mode. `config`: its
    config.json as already read (the pre-check's), else read here."""
    from transformers.utils import logging as transformers_logging

    config = config if config is not None else read_config(folder)
    refuse_remote_code(folder, config)
    weight_files(folder)
    auto_class = _auto_class(folder, config)
    # A progress bar per load would bury the CLI's own progress and tables.
    transformers_logging.disable_progress_bar()
    model = auto_class.from_pretrained(
        folder, trust_remote_code=False, use_safetensors=True, dtype=dtype, local_files_only=True
    )
    return model.to(device).eval()


def load_target(folder: Path, *, device: str = "auto", dtype: str = "float32",
                config: dict[str, Any] | None = None) -> LoadedTarget:
    """Load a target model with its tokenizer from a local folder; `config`: its config.json as already read (the
    pre-check's), else read here (`registry.local.read_config`: LocalRepoError for no folder or no usable config)."""
    from transformers import AutoTokenizer

    folder = Path(folder)
    config = config if config is not None else read_config(folder)
    model = load_causal_lm(folder, device=resolve_device(device), dtype=resolve_dtype(dtype), config=config)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False, local_files_only=True)
    except (OSError, ValueError) as error:
        raise LoadError(f"{folder}: the tokenizer cannot be loaded: {error}") from error
    return LoadedTarget(model=model, tokenizer=tokenizer, config=config, path=folder, files_digest=files_digest(folder))
