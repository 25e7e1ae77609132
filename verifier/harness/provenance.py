"""Provenance every engine records the same way: versions, the verifier's own commit, prompt set and tokenizer
digests, the settings that shape a decode, and the Hub snapshot sha of a model folder.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from registry.local import folder_tokenizer_digest as tokenizer_digest
from verifier.build_cache import BUILD_MARKER
from verifier.harness.contract import Engine
from registry.domain.measurement import RunSettings
from verifier.metrics import METRIC_VERSION
from verifier.prompts import PromptSet


def common_provenance(engine: Engine, prompt_sets: Sequence[PromptSet], sets_digest: str, settings: RunSettings,
                      target_dir: Path | None, drafter: Path | None) -> dict[str, Any]:
    """What both engines record the same way."""
    drafter_dir = drafter if drafter is not None and drafter.is_dir() else None
    return {
        "metric_version": METRIC_VERSION,
        "verifier_version": package_version(),
        "verifier_git_sha": git_sha(),
        "prompt_sets": {s.name: s.digest for s in prompt_sets},
        "prompt_sets_digest": sets_digest,
        "method": engine.method,
        "draft_length": engine.draft_length,
        "temperature": settings.temperature,
        "seed": settings.seed,
        "seed_scheme": "sha256(seed/repeat/set/prompt) >> 33",
        "max_new_tokens": settings.max_new_tokens,
        "repeats": settings.repeats,
        "warmup": settings.warmup,
        "dtype": settings.dtype,
        # A target the project built itself (verifier.build_cache marks its builds): numbers about the harness,
        # not about a checkpoint anyone serves.
        "test_model": is_test_model(target_dir) if target_dir is not None else None,
        "target_tokenizer_digest": tokenizer_digest(target_dir) if target_dir is not None else None,
        "drafter_tokenizer_digest": tokenizer_digest(drafter_dir) if drafter_dir is not None else None,
        "target_generation_config_digest": file_digest(target_dir, "generation_config.json") if target_dir else None,
        "drafter_generation_config_digest": (
            file_digest(drafter_dir, "generation_config.json") if drafter_dir is not None else None
        ),
    }


def is_test_model(folder: Path) -> bool:
    """Whether `folder` is one of the tiny models the project builds (`verifier.build_cache.cached_build`)."""
    return (folder / BUILD_MARKER).is_file()


def machine_load(before: float) -> dict[str, Any]:
    """How busy the machine was while a run was measured: the 1-minute load average at its start (`before`) and end
    against the CPUs the run may use. Above that, threads wait for a core and tok/s says more about the neighbours
    than about the pair (τ and acceptance are unaffected)."""
    cpus = len(os.sched_getaffinity(0))
    after = os.getloadavg()[0]
    return {"cpus": cpus, "load_average": [round(before, 2), round(after, 2)], "contended": max(before, after) > cpus}


def file_digest(folder: Path, name: str) -> str | None:
    path = folder / name
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def package_version() -> str | None:
    try:
        return version("drafter-registry")
    except PackageNotFoundError:
        return None


def git_sha() -> str | None:
    """The commit of the verifier's checkout (with "-dirty" when it has local changes); None when installed."""
    root = Path(__file__).resolve().parents[2]  # verifier/harness/provenance.py → the checkout
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha or None


def snapshot_sha(folder: Path) -> str | None:
    """The commit sha when `folder` is a Hugging Face cache snapshot (…/snapshots/<sha>)."""
    name = folder.resolve().name
    is_sha = len(name) == 40 and all(c in "0123456789abcdef" for c in name)
    return name if is_sha and folder.resolve().parent.name == "snapshots" else None
