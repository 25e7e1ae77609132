"""Where a verify finds the folders it runs: a local folder as is; a repo id from the service's downloads (what
`drafters fetch` or autoverify downloaded), else from the local Hugging Face cache. Nothing here downloads.
Which of the two a string is, is `registry.local.looks_like_folder`'s one rule."""

from __future__ import annotations

from pathlib import Path

from registry.local import looks_like_folder
from registry.store import Store, downloads
from verifier.folders import cached_snapshot


def resolve_folder(ref: str, revision: str | None) -> Path:
    """A local folder as is; a repo id from the local Hugging Face cache (never downloaded)."""
    path = Path(ref).expanduser()
    if looks_like_folder(ref):
        if path.is_dir():
            return path
    elif ref.count("/") == 1:
        return cached_snapshot(ref, revision or "main")
    raise FileNotFoundError(f"{ref} is neither a model folder nor a repo id")


def drafter_path(ref: str, revision: str | None) -> Path:
    """A drafter folder, a repo id from the local cache, or (llama.cpp also takes one) a .gguf file."""
    gguf = Path(ref).expanduser()
    return gguf if gguf.is_file() and gguf.suffix == ".gguf" else resolve_folder(ref, revision)


def fetched(store: Store, ref: str, revision: str | None) -> tuple[Path, str] | None:
    """The folder and sha of the newest complete download of repo id `ref` (at `revision` when one is given) that
    `drafters fetch` or autoverify left in the service's downloads; None for a local path or a repo never fetched."""
    if looks_like_folder(ref):
        return None
    found = [d for d in store.downloads.list_downloads(status=downloads.COMPLETE)
             if d.repo_id == ref and (revision is None or d.revision == revision) and Path(d.path).is_dir()]
    newest = max(found, key=lambda d: d.finished_at or d.started_at, default=None)
    return (Path(newest.path), newest.revision) if newest else None
