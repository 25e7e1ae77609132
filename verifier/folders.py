"""Model folders on disk, without torch: the safetensors weight files the verifier loads, their digests, and
snapshots in the local Hugging Face cache. A folder's config.json is read by `registry.local` (`read_config`,
`read_local_repo`), the one reader of a folder, which fails with `LocalRepoError`; `LoadError` is a folder that can
be read but not loaded safely (pickle weights only, remote code, not in the cache).

A folder is a local checkout (config.json + *.safetensors (+ index) + tokenizer files) or a snapshot in the local
Hugging Face cache found by repo id + sha. Loading the weights into torch is verifier/loading.py's job.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from huggingface_hub import snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError

from registry.errors import UserError
from registry.local import CONFIG_FILE, SAFETENSORS_INDEX, safetensors_files

PICKLE_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


class LoadError(UserError, ValueError):
    """A folder cannot be loaded safely; the message says why and what to do."""


def weight_files(folder: Path) -> list[Path]:
    """The safetensors weight files `folder` loads, the same files whose tensor bytes its weight count sums
    (`registry.local.safetensors_files`: its index's shards, else every *.safetensors); refuses folders that only
    have pickle weights."""
    safetensors = safetensors_files(folder)
    if safetensors:
        return safetensors
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_WEIGHT_SUFFIXES)
    if pickles:
        raise LoadError(
            f"{folder} has only pickle weights ({', '.join(pickles)}); the verifier loads safetensors only "
            "because pickle files can run arbitrary code. Convert the weights to safetensors first."
        )
    raise LoadError(f"{folder} has no *.safetensors weight files: `drafters fetch REPO --revision SHA` downloads a "
                    "repo's config, tokenizer and weights into $DRAFTERS_HOME/downloads and prints the folder to pass")


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


def cached_snapshot(repo_id: str, revision: str, *, cache_dir: Path | None = None) -> Path:
    """The folder of `repo_id` at `revision` in the local Hugging Face cache; never touches the network."""
    try:
        folder = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=True)
    except LocalEntryNotFoundError as error:
        raise LoadError(
            f"{repo_id}@{revision} is not in the local Hugging Face cache, and the verifier never downloads: "
            f"`drafters fetch {repo_id} --revision SHA` downloads it into $DRAFTERS_HOME/downloads, where `drafters "
            "verify` finds it by its repo id"
        ) from error
    return Path(folder)
