"""Turning huggingface_hub's answers into the client's dataclasses: every field checked, anything odd a BadResponse
naming the entry; and the weight-file digest that tells replaced weights from a README edit."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from registry.domain.names import COMMIT_SHA, is_repo_id
from registry.hub.types import BadResponse, HubFile, HubModel, HubRevision

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
SHARD_INDEX_SUFFIXES = (".safetensors.index.json", ".bin.index.json")
BASE_MODEL_RELATIONS = frozenset({"adapter", "merge", "quantized", "finetune"})
# The largest count or size a database column holds (a signed 64-bit integer): a parameter total or a file size
# above it is no real model's (the largest have ~10^12 parameters), and storing it would fail that repo every poll
# until quarantine. It is read as unknown instead.
MAX_STORED_INT = 2**63 - 1


def is_weight_file(path: str) -> bool:
    return path.endswith(WEIGHT_SUFFIXES)


def _config_summary(info: Any) -> tuple[tuple[str, ...], str | None]:
    """`architectures` and `model_type` from the Hub's config summary; anything odd reads as unknown."""
    config = getattr(info, "config", None)
    if not isinstance(config, dict):
        return (), None
    architectures = config.get("architectures")
    model_type = config.get("model_type")
    names = tuple(a for a in architectures if isinstance(a, str)) if isinstance(architectures, list) else ()
    return names, model_type if isinstance(model_type, str) else None


def weight_digest(files: Iterable[HubFile]) -> str | None:
    """A digest of the weight files only (weights and shard indexes), so config- or README-only commits leave it
    unchanged while replaced weights change it. None when there are no weight files."""
    lines = []
    for file in sorted(files, key=lambda item: item.path):
        if not file.path.endswith(WEIGHT_SUFFIXES + SHARD_INDEX_SUFFIXES):
            continue
        identity = file.lfs_sha256 or file.blob_id
        if identity is None:
            raise ValueError(f"{file.path} has no blob id: list files with blob metadata (HubClient.revision)")
        lines.append(f"{file.path}\0{identity}\0{file.size}\n")
    if not lines:
        return None
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def checked_sha(value: Any, what: str) -> str:
    if not isinstance(value, str) or not COMMIT_SHA.fullmatch(value):
        raise BadResponse(f"{what}: missing or malformed commit sha")
    return value


def iso_or_none(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def checked_datetime(value: Any, what: str) -> datetime:
    if not isinstance(value, datetime):
        raise BadResponse(f"{what}: missing or malformed date")
    return value


def _tags(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise BadResponse(f"{what}: tags are not a list of strings")
    return tuple(value)


def _optional_str(value: Any, what: str, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadResponse(f"{what}: {name} is not a string")
    return value


def _base_models(tags: tuple[str, ...], card_data: Any) -> tuple[tuple[str, ...], str | None]:
    """Parents from the Hub's model-tree tags (`base_model:<relation>:<id>`), else from the card."""
    parents: list[str] = []
    relation: str | None = None
    for tag in tags:
        parts = tag.split(":", 2)
        if len(parts) == 3 and parts[0] == "base_model" and parts[1] in BASE_MODEL_RELATIONS:
            relation = relation or parts[1]
            parents.append(parts[2])
    if parents:
        return tuple(dict.fromkeys(parents)), relation
    if card_data is None:
        return (), None
    declared = card_data.get("base_model")
    if isinstance(declared, str):
        parents = [declared]
    elif isinstance(declared, list):
        parents = [item for item in declared if isinstance(item, str)]
    card_relation = card_data.get("base_model_relation")
    return tuple(parents), card_relation if isinstance(card_relation, str) and parents else None


def _gated(value: Any, what: str) -> bool:
    if value in (None, False):
        return False
    if value is True or value in ("auto", "manual"):
        return True
    raise BadResponse(f"{what}: unexpected gated value")


def hub_model(info: Any) -> HubModel:
    what = f"listing entry {getattr(info, 'id', '?')}"
    repo_id = _optional_str(info.id, what, "id")
    # The Hub's own naming rule, checked here: an id that breaks it would fail every later name comparison.
    if not repo_id or not is_repo_id(repo_id):
        raise BadResponse(f"{what}: malformed repo id")
    tags = _tags(info.tags, what)
    base_models, relation = _base_models(tags, info.card_data)
    return HubModel(
        repo_id=repo_id,
        sha=checked_sha(info.sha, what),
        last_modified=checked_datetime(info.last_modified, what),
        created_at=checked_datetime(info.created_at, what),
        tags=tags,
        gated=_gated(info.gated, what),
        base_models=base_models,
        base_model_relation=relation,
        pipeline_tag=_optional_str(info.pipeline_tag, what, "pipeline_tag"),
        library_name=_optional_str(info.library_name, what, "library_name"),
        architectures=_config_summary(info)[0],
        model_type=_config_summary(info)[1],
        # Anything but an explicit false counts as private: never announce what might be.
        private=getattr(info, "private", None) is not False,
    )


def _hub_file(sibling: Any, what: str) -> HubFile:
    path = sibling.rfilename
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
        raise BadResponse(f"{what}: unsafe or missing file name")
    size = sibling.size
    if size is not None and (not isinstance(size, int) or size < 0):
        raise BadResponse(f"{what}: bad size for {path}")
    if size is not None and size > MAX_STORED_INT:
        size = None  # unknown: no file is that large
    lfs_sha = sibling.lfs.sha256 if sibling.lfs is not None else None
    return HubFile(path=path, size=size, blob_id=_optional_str(sibling.blob_id, what, "blobId"),
                   lfs_sha256=_optional_str(lfs_sha, what, "lfs.sha256"))


def hub_revision(info: Any, what: str) -> HubRevision:
    repo_id = _optional_str(info.id, what, "id")
    # The Hub's own naming rule, checked here: an id that breaks it would fail every later name comparison.
    if not repo_id or not is_repo_id(repo_id):
        raise BadResponse(f"{what}: malformed repo id")
    tags = _tags(info.tags, what)
    base_models, relation = _base_models(tags, info.card_data)
    files = tuple(_hub_file(sibling, what) for sibling in info.siblings or [])
    parameters = info.safetensors.total if info.safetensors is not None else None
    if parameters is not None and (not isinstance(parameters, int) or parameters < 0):
        raise BadResponse(f"{what}: bad safetensors parameter total")
    if parameters is not None and parameters > MAX_STORED_INT:
        parameters = None  # unknown, because the Hub's total is beyond any model's
    return HubRevision(
        repo_id=repo_id,
        sha=checked_sha(info.sha, what),
        last_modified=checked_datetime(info.last_modified, what),
        created_at=checked_datetime(info.created_at, what),
        files=files,
        parameters=parameters,
        gated=_gated(info.gated, what),
        base_models=base_models,
        base_model_relation=relation,
        tags=tags,
        architectures=_config_summary(info)[0],
        model_type=_config_summary(info)[1],
        private=getattr(info, "private", None) is not False,
    )
