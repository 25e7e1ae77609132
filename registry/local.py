"""A model folder on local disk (config.json, tokenizer files, weights) read the way the Hub watcher reads a repo:
the one reader of a folder (`read_local_repo`: its config, tokenizer digest and weight bytes, each read once; its
pair side, `.side()`), of its config alone (`read_config`) and of its weight bytes (`weight_bytes`), failing one
way (`LocalRepoError`, the same message whichever command read the folder: `drafters check`, the verifier's
pre-check, the loaders); and the one rule of whether a string names a folder or a Hub repo id (`looks_like_folder`).

Weight bytes are the tensor bytes of the safetensors files the folder loads (parameters × dtype bytes, read from
each file's header length: the data region after the header is exactly the tensors): the shards its
`model.safetensors.index.json` names when it has one, else every `*.safetensors`. Pickle and GGUF files are not
counted: the verifier never loads pickles, and a GGUF beside safetensors is a second copy of the same weights.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from registry.domain import configs, pair
from registry.domain.configs import ConfigError
from registry.domain.ref_labels import written_as_path
from registry.domain.tokenizers import tokenizer_digest
from registry.domain.records import DrafterRecord
from registry.errors import Failed
from registry.store import NotFound, Store

SAFETENSORS_INDEX = "model.safetensors.index.json"
CONFIG_FILE = "config.json"


class LocalRepoError(Failed, ValueError):
    """A model folder that cannot be read (exit status 1)."""


@dataclass(frozen=True)
class LocalRepo:
    path: Path
    config: dict[str, Any] | None  # config.json parsed; None when it is not a usable JSON object (`config_problem`)
    config_problem: str | None
    tokenizer_digest: str | None
    weight_bytes: int

    def side(self, method: str | None = None) -> pair.Side:
        """This folder as one side of a pair (a folder has no repo id and declares nothing)."""
        return pair.Side(config=self.config, tokenizer_digest=self.tokenizer_digest, problem=self.config_problem,
                         method=method)

    def usable_config(self) -> dict[str, Any]:
        """The parsed config.json; LocalRepoError (as `read_config` says it) where it is no usable JSON object."""
        if self.config is None:
            raise LocalRepoError(f"{self.path / CONFIG_FILE}: {self.config_problem}")
        return self.config


def looks_like_folder(value: str) -> bool:
    """The one rule of "folder or repo id" for what a user types: a folder when `value` is written as a path
    (`registry.domain.ref_labels.written_as_path`, the rule a stored reference is read by, on any machine) or is an
    existing directory here ("models/qwen3"); anything else is a repo id (the registry, the downloads and the local
    Hugging Face cache resolve it)."""
    # "" would be the current directory; a name too long for the file system is no folder either.
    if not value.strip():
        return False
    try:
        return written_as_path(value) or Path(value).expanduser().is_dir()
    except (OSError, ValueError):
        return False


def read_local_repo(path: Path) -> LocalRepo:
    """The folder's config, tokenizer digest and weight bytes; LocalRepoError when it is no folder with a
    config.json, or its tokenizer files or safetensors cannot be read (an unusable config is `config_problem`)."""
    path = Path(path).expanduser()
    raw = _config_bytes(path)
    try:
        digest = folder_tokenizer_digest(path)
    except ConfigError as exc:
        raise LocalRepoError(f"{path}: bad tokenizer files: {exc}") from None
    try:
        config, problem = configs.parse_config(raw), None
    except ConfigError as exc:
        config, problem = None, str(exc)
    return LocalRepo(path=path, config=config, config_problem=problem, tokenizer_digest=digest,
                     weight_bytes=weight_bytes(path))


def read_config(folder: Path) -> dict[str, Any]:
    """The folder's config.json as a JSON object; LocalRepoError, in `read_local_repo`'s words, when it has none or
    the file is no usable JSON object."""
    folder = Path(folder).expanduser()
    try:
        return configs.parse_config(_config_bytes(folder))
    except ConfigError as exc:
        raise LocalRepoError(f"{folder / CONFIG_FILE}: {exc}") from None


def _config_bytes(folder: Path) -> bytes:
    if not folder.is_dir():
        raise LocalRepoError(f"{folder} is not a folder")
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        raise LocalRepoError(f"{folder} has no {CONFIG_FILE}")
    return config_path.read_bytes()


def folder_tokenizer_digest(folder: Path) -> str | None:
    """The digest of the folder's tokenizer files (None without any); ConfigError when they cannot be read."""
    files = {name: (folder / name).read_bytes() for name in pair.TOKENIZER_FILES if (folder / name).is_file()}
    return tokenizer_digest(files) if files else None


def safetensors_files(folder: Path) -> list[Path]:
    """The safetensors files `folder` loads: its index's shards when it has an index, else every *.safetensors."""
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
            raise LocalRepoError(f"{index} is not a safetensors index: {exc}") from None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise LocalRepoError(f"{index} has no weight_map of tensor names to file names")
        shards = sorted({Path(name).name for name in weight_map.values()})
        missing = [name for name in shards if not (folder / name).is_file()]
        if missing:
            raise LocalRepoError(f"{index} names shards that are not in the folder: {', '.join(missing)}")
        return [folder / name for name in shards]
    return sorted(folder.glob("*.safetensors"))


def tensor_bytes(path: Path) -> int:
    """The tensor bytes of one safetensors file: its size less the 8-byte header length and the JSON header."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
    if len(head) < 8:
        raise LocalRepoError(f"{path} is not a safetensors file (shorter than its header length)")
    (header_length,) = struct.unpack("<Q", head)
    if 8 + header_length > size:
        raise LocalRepoError(f"{path} is not a safetensors file (header of {header_length} bytes in {size})")
    return size - 8 - header_length


def weight_bytes(folder: Path) -> int:
    """Tensor bytes of the folder's safetensors weights (0 without any)."""
    return sum(tensor_bytes(path) for path in safetensors_files(folder))


def resolve_side(store: Store, value: str, *, drafter: bool) -> pair.Side:
    """One side of a pair, from a repo id the registry knows (its head revision) or a local folder; NotFound for
    neither (a path that is no folder here: a served model's file, a stored run's deleted folder)."""
    kind = "drafter" if drafter else "checkpoint"
    unknown = NotFound(f"unknown {kind} {value!r}: not in the registry and not a folder")
    if looks_like_folder(value):
        if not Path(value).expanduser().is_dir():
            raise unknown
        return read_local_repo(Path(value)).side()
    record = store.reads.get_drafter(value) if drafter else store.reads.get_checkpoint(value)
    if record is None:
        raise unknown
    head = store.reads.drafter_head_revision(value) if drafter else store.reads.head_revision(value)
    side = pair.Side(repo_id=record.repo_id)
    if head is not None:
        side = replace(side, config=head.config, tokenizer_digest=head.tokenizer_digest, problem=head.config_problem)
    if isinstance(record, DrafterRecord):
        side = replace(side, method=record.method, declared_targets=tuple(
            store.checkpoints.canonical_repo_id(t) for t in pair.declared_targets(record.targets)))
    return side
