"""Tiny models the project builds itself (CPU, seconds), and a cache so each is built once per settings.

`cached_build` keys a folder by a hash of the builder's source files and its settings, builds into a temporary
sibling folder and renames it into place, under a file lock so parallel test workers build it only once.
`training_steps` counts a build's training steps as they happen, for the progress `drafters up` prints.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

BUILD_MARKER = ".complete"


def build_key(source_files: Iterable[Path], settings: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in source_files):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def cached_build(
    cache_root: Path,
    name: str,
    build: Callable[[Path], None],
    *,
    source_files: Iterable[Path],
    settings: dict[str, Any],
) -> Path:
    """`cache_root/name-<key>`, built by `build(folder)` unless a complete build with the same key exists."""
    cache_root.mkdir(parents=True, exist_ok=True)
    folder = cache_root / f"{name}-{build_key(source_files, settings)}"
    with (cache_root / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / BUILD_MARKER).is_file():
            return folder
        staging = cache_root / f"{folder.name}.building"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        build(staging)
        (staging / BUILD_MARKER).write_text(json.dumps(settings, sort_keys=True, default=str) + "\n")
        staging.rename(folder)
    return folder


@contextmanager
def training_steps(report: Callable[[int], None]) -> Iterator[None]:
    """Call `report(steps so far)` after each optimizer step this thread takes inside the block.

    The builders' progress is observed from outside them, through torch's global optimizer hook, because their
    source files are their cache key: a progress line added to a builder would rebuild every cached model."""
    from torch.optim.optimizer import register_optimizer_step_post_hook  # torch: the verifier extra

    thread = threading.get_ident()
    steps = 0

    def hook(_optimizer: object, _args: object, _kwargs: object) -> None:
        nonlocal steps
        if threading.get_ident() == thread:  # another thread's training (a test, a second build) is not ours
            steps += 1
            report(steps)

    handle = register_optimizer_step_post_hook(hook)
    try:
        yield
    finally:
        handle.remove()
