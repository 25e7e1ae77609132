"""The compatibility pre-check, made once per measurement before any engine loads or converts a single weight:
both folders read once by `registry.local.read_local_repo` (config, tokenizer digest, weight bytes: the reader and
the errors of `drafters check`), the pair judged by `registry.domain.pair` (the rules the registry's stored
verdicts use), refused with the same `IncompatiblePair` whichever engine (PyTorch, llama.cpp) was asked to run it.

The harness makes it (`verifier.harness.run.measure_pair`; the curve job, which runs no harness loop, makes it the
same way) and an engine's loader takes the `CheckedPair` it returns: no engine loads a pair that was not checked,
and none reads the folders' configs again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from registry.domain import pair
from registry.local import LocalRepo, read_local_repo
from verifier.harness.contract import IncompatiblePair

GGUF_SUFFIX = ".gguf"


@dataclass(frozen=True)
class CheckedPair:
    """A pair the pre-check let through, its folders as read once."""

    target: LocalRepo
    drafter: LocalRepo | None  # None: baseline only, or a drafter given as a .gguf file (no folder to judge)
    drafter_path: Path | None  # the drafter as given: its folder or its .gguf file; None: baseline only
    method: str | None  # the method to run (requested, else its config's, else a draft model); None: no folder

    @property
    def drafter_config(self) -> dict[str, Any] | None:
        """The drafter's config.json as the pre-check read it (None without a drafter folder)."""
        return self.drafter.usable_config() if self.drafter is not None else None


def check_pair(target_dir: Path, drafter: Path | None, method: str | None = None) -> CheckedPair:
    """The pair as read from its folders once the pair is not incompatible; raises `IncompatiblePair` with the
    verdict's reasons when it is, and `registry.local.LocalRepoError` when a folder cannot be read or has no usable
    config.json. A .gguf drafter (llama.cpp) has no config to judge: its metadata says its method."""
    target = read_local_repo(Path(target_dir))
    target.usable_config()
    if drafter is None:
        return CheckedPair(target=target, drafter=None, drafter_path=None, method=None)
    drafter = Path(drafter).expanduser()
    if drafter.is_file() and drafter.suffix == GGUF_SUFFIX:
        return CheckedPair(target=target, drafter=None, drafter_path=drafter, method=method)
    folder = read_local_repo(drafter)
    config = folder.usable_config()
    verdict = pair.judge(folder.side(method), target.side())
    if verdict.verdict == "incompatible":
        raise IncompatiblePair(verdict.reasons)
    return CheckedPair(target=target, drafter=folder, drafter_path=drafter, method=pair.method_to_run(config, method))
