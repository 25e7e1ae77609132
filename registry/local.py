"""A model folder on local disk (config.json, tokenizer files, weights) read the way the Hub watcher reads a repo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from registry.domain.configs import ConfigError
from registry.domain.tokenizers import tokenizer_digest
from registry.errors import Failed

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")


class LocalRepoError(Failed, ValueError):
    """A model folder that cannot be read (exit status 1)."""


@dataclass(frozen=True)
class LocalRepo:
    path: Path
    config_raw: bytes
    tokenizer_digest: str | None
    weight_bytes: int


def looks_like_folder(value: str) -> bool:
    # "" would be the current directory; a name too long for the file system is no folder either.
    if not value.strip():
        return False
    try:
        return Path(value).expanduser().is_dir()
    except (OSError, ValueError):
        return False


def read_local_repo(path: Path) -> LocalRepo:
    path = path.expanduser()
    config_path = path / "config.json"
    if not path.is_dir():
        raise LocalRepoError(f"{path} is not a folder")
    if not config_path.is_file():
        raise LocalRepoError(f"{path} has no config.json")
    tokenizer_files = {name: (path / name).read_bytes() for name in TOKENIZER_FILES if (path / name).is_file()}
    try:
        digest = tokenizer_digest(tokenizer_files) if tokenizer_files else None
    except ConfigError as exc:
        raise LocalRepoError(f"{path}: bad tokenizer files: {exc}") from None
    weight_bytes = sum(p.stat().st_size for p in path.iterdir() if p.suffix in WEIGHT_SUFFIXES)
    return LocalRepo(path=path, config_raw=config_path.read_bytes(), tokenizer_digest=digest, weight_bytes=weight_bytes)
